package gc

import droverv1 "github.com/droverhq/drover/proto/drover/v1"

// entries cuts the garbage into GCEntries of at most batchSize ids. Ids go
// in the order allocations, evaluations, nodes, job versions, jobs, each
// kind sorted, filling one entry before the next: an object then lands in
// the first entry that can hold it once everything that refers to it is
// in that entry or an earlier one.
func (g *garbage) entries(batchSize int) []*droverv1.GCEntry {
	if batchSize <= 0 {
		batchSize = DefaultBatchSize
	}
	b := &batcher{size: batchSize}
	for _, id := range g.allocs.sorted() {
		e := b.slot()
		e.AllocIds = append(e.AllocIds, id)
	}
	for _, id := range g.evals.sorted() {
		e := b.slot()
		e.EvalIds = append(e.EvalIds, id)
	}
	for _, id := range g.nodes.sorted() {
		e := b.slot()
		e.NodeIds = append(e.NodeIds, id)
	}
	for _, v := range g.versions {
		e := b.slot()
		e.JobVersions = append(e.JobVersions, v)
	}
	for _, id := range g.jobs.sorted() {
		e := b.slot()
		e.JobIds = append(e.JobIds, id)
	}
	return b.out
}

// batcher hands out the entry the next id goes in.
type batcher struct {
	size int
	used int // ids in the last entry
	out  []*droverv1.GCEntry
}

// slot returns the entry for one more id, starting a new one when the last
// is full.
func (b *batcher) slot() *droverv1.GCEntry {
	if len(b.out) == 0 || b.used == b.size {
		b.out = append(b.out, &droverv1.GCEntry{})
		b.used = 0
	}
	b.used++
	return b.out[len(b.out)-1]
}
