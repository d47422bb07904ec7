package gc

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// stoppedJobOnDownNode builds a stopped job, long gone, with allocations
// allocs on one node that went down long ago, and three finished
// evaluations: ten ids in all for allocs = 5.
func stoppedJobOnDownNode(f *fixture, allocs int) (*droverv1.Node, *droverv1.Job) {
	n, j := readyNode(f), f.job(service, ago(old))
	var placed []*droverv1.Allocation
	for range allocs {
		placed = append(placed, f.alloc(n, j, nil, ago(old)))
	}
	f.stopJob(j, ago(old))
	f.eval(j, evalComplete, ago(old))
	f.report(ago(old), running, placed...)
	f.nodeStatus(n.GetId(), down, ago(old))
	f.stop(ago(old), true, placed...)
	f.finishEvals(j, ago(old))
	return n, j
}

func TestPlanBatches(t *testing.T) {
	f := newFixture(t)
	n, j := stoppedJobOnDownNode(f, 5)
	snap := f.s.Snapshot()

	entries := Plan(snap, DefaultThresholds(), now, 3)
	if len(entries) != 4 {
		t.Fatalf("got %d entries, want 4: %v", len(entries), entries)
	}
	checkSafeOrder(t, snap, entries, 3)
	got := flatten(entries)
	if len(got.Allocs) != 5 || len(got.Evals) != 3 || !reflect.DeepEqual(got.Nodes, idsOf(n)) || !reflect.DeepEqual(got.Jobs, idsOf(j)) {
		t.Errorf("collected %+v, want 5 allocations, 3 evaluations, node %s and job %s", got, n.GetId(), j.GetId())
	}
	if last := entries[len(entries)-1]; !reflect.DeepEqual(last.GetJobIds(), idsOf(j)) {
		t.Errorf("last entry %v, want the job", last)
	}

	// One entry when everything fits, and the default for a non-positive size.
	for _, size := range []int{10, 0, -1} {
		if got := Plan(snap, DefaultThresholds(), now, size); len(got) != 1 {
			t.Errorf("batch size %d: got %d entries, want 1", size, len(got))
		}
	}
}

func TestPlanBatchesManyJobs(t *testing.T) {
	f := newFixture(t)
	for range 4 {
		stoppedJobOnDownNode(f, 3)
	}
	snap := f.s.Snapshot()
	for _, size := range []int{1, 2, 5, 7} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			entries := Plan(snap, DefaultThresholds(), now, size)
			checkSafeOrder(t, snap, entries, size)
			c := countIDs(entries)
			if want := (idCounts{Nodes: 4, Allocs: 12, Evals: 12, Jobs: 4}); c != want {
				t.Errorf("counts %+v, want %+v", c, want)
			}
			if total := int(c.Nodes + c.Allocs + c.Evals + c.Jobs + c.JobVersions); len(entries) != (total+size-1)/size {
				t.Errorf("%d entries for %d ids of batch size %d", len(entries), total, size)
			}
		})
	}
}

func TestPlanNothing(t *testing.T) {
	f := newFixture(t)
	readyNode(f)
	f.job(service, ago(old))
	if got := Plan(f.s.Snapshot(), Force(), now, DefaultBatchSize); got != nil {
		t.Errorf("got %v, want no entries", got)
	}
}

func TestPlanForce(t *testing.T) {
	f := newFixture(t)
	// A node that just went down with its allocation lost.
	n, live := readyNode(f), f.job(service, ago(fresh))
	lost := f.alloc(n, live, nil, ago(fresh))
	f.nodeStatus(n.GetId(), down, ago(fresh))
	f.stop(ago(fresh), true, lost)
	// A job stopped a moment ago whose work has finished.
	other := readyNode(f)
	stopped := f.job(service, ago(fresh))
	done := f.alloc(other, stopped, nil, ago(fresh))
	f.report(ago(fresh), complete, done)
	f.stopJob(stopped, ago(fresh))
	f.finishEvals(stopped, ago(fresh))
	// An evaluation that just finished.
	ev := f.eval(live, evalComplete, ago(fresh))
	// What Force still keeps: a running allocation and its node, a pending
	// evaluation (the live job's registration) and the live job.
	f.report(ago(fresh), running, f.alloc(other, live, nil, ago(fresh)))

	snap := f.s.Snapshot()
	if got := Plan(snap, DefaultThresholds(), now, DefaultBatchSize); got != nil {
		t.Errorf("default thresholds collected fresh objects: %v", got)
	}
	entries := Plan(snap, Force(), now, DefaultBatchSize)
	checkSafeOrder(t, snap, entries, DefaultBatchSize)
	want := collected{
		Nodes:  idsOf(n),
		Allocs: idsOf(lost, done),
		Evals:  append(idsOf(slices.Collect(snap.EvalsByJob(stopped.GetId()))...), ev.GetId()),
		Jobs:   idsOf(stopped),
	}.sorted()
	if got := flatten(entries); !reflect.DeepEqual(got, want) {
		t.Errorf("forced collection\n got %+v\nwant %+v", got, want)
	}
}

func TestPlanJobVersions(t *testing.T) {
	f := newFixture(t)
	n := readyNode(f)
	j := f.job(service, ago(old)) // version 0
	j = f.newVersion(j, ago(old)) // version 1: one allocation still runs it
	f.report(ago(old), running, f.alloc(n, j, nil, ago(old)))
	j = f.newVersion(j, ago(old)) // version 2: its only allocation is collected
	gone := f.alloc(n, j, nil, ago(old))
	f.report(ago(old), complete, gone)
	f.stop(ago(old), false, gone)
	for range 7 { // versions 3 to 9
		j = f.newVersion(j, ago(old))
	}
	// A job with only KeepJobVersions versions keeps them all.
	small := f.job(service, ago(old))
	for range KeepJobVersions - 1 {
		small = f.newVersion(small, ago(old))
	}
	if j.GetVersion() != 9 || small.GetVersion() != KeepJobVersions-1 {
		t.Fatalf("versions %d and %d, want 9 and %d", j.GetVersion(), small.GetVersion(), KeepJobVersions-1)
	}

	snap := f.s.Snapshot()
	entries := Plan(snap, DefaultThresholds(), now, DefaultBatchSize)
	checkSafeOrder(t, snap, entries, DefaultBatchSize)
	got := flatten(entries)
	want := collected{Allocs: idsOf(gone), Versions: []string{versionName(j.GetId(), 0), versionName(j.GetId(), 2), versionName(j.GetId(), 3)}}.sorted()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("collected\n got %+v\nwant %+v", got, want)
	}
	// Versions are listed in version order, not as text.
	j2 := f.job(service, ago(old))
	for range 12 {
		j2 = f.newVersion(j2, ago(old))
	}
	var versions []uint64
	for _, e := range Plan(f.s.Snapshot(), DefaultThresholds(), now, DefaultBatchSize) {
		for _, v := range e.GetJobVersions() {
			if v.GetJobId() == j2.GetId() {
				versions = append(versions, v.GetVersion())
			}
		}
	}
	if want := []uint64{0, 1, 2, 3, 4, 5, 6}; !reflect.DeepEqual(versions, want) {
		t.Errorf("pruned versions %v, want %v", versions, want)
	}
}

func TestPlanDeterministic(t *testing.T) {
	f := newFixture(t)
	for range 3 {
		stoppedJobOnDownNode(f, 4)
	}
	n, j := readyNode(f), f.job(service, ago(old))
	for range 5 {
		a := f.alloc(n, j, nil, ago(old))
		f.report(ago(old), complete, a)
		f.eval(j, evalComplete, ago(old))
	}
	first := Plan(f.s.Snapshot(), DefaultThresholds(), now, 4)
	for i := range 5 {
		again := Plan(f.s.Snapshot(), DefaultThresholds(), now, 4)
		if !slices.EqualFunc(first, again, func(a, b *droverv1.GCEntry) bool { return proto.Equal(a, b) }) {
			t.Fatalf("run %d differs:\n%v\n%v", i, first, again)
		}
	}
	// Each kind is in id order across entries.
	c := flatten(first)
	var allocs, evals []string
	for _, e := range first {
		allocs = append(allocs, e.GetAllocIds()...)
		evals = append(evals, e.GetEvalIds()...)
	}
	if !reflect.DeepEqual(allocs, c.Allocs) || !reflect.DeepEqual(evals, c.Evals) {
		t.Errorf("ids not sorted: allocations %v, evaluations %v", allocs, evals)
	}
}

// idCounts are the numbers of ids of each kind in a set of entries.
type idCounts struct{ Nodes, Allocs, Evals, Jobs, JobVersions int64 }

func countIDs(entries []*droverv1.GCEntry) idCounts {
	var c idCounts
	for _, e := range entries {
		c.Nodes += int64(len(e.GetNodeIds()))
		c.Allocs += int64(len(e.GetAllocIds()))
		c.Evals += int64(len(e.GetEvalIds()))
		c.Jobs += int64(len(e.GetJobIds()))
		c.JobVersions += int64(len(e.GetJobVersions()))
	}
	return c
}
