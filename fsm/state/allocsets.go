package state

import (
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// allocSet is a row of the derived node_allocs or job_allocs table: the ids
// of the allocations on one node or of one job. It replaces a go-memdb
// secondary index over allocations, which would cost one radix-tree entry
// (about 450 bytes) per allocation per index; a set costs one string header
// per allocation. It also gives blocking queries one row to watch per node.
//
// Rows are immutable like every stored object; a write transaction builds a
// new row when it changes a set.
type allocSet struct {
	// key is the node id or job id.
	key string
	// ids are sorted allocation ids; they share memory with the allocations.
	ids []string
	// index is the raft index of the last change the set tracks: for nodes
	// the last server-side change to one of its allocations, for jobs the
	// last change of any kind.
	index uint64
	// live counts, in job sets, the allocations that are not terminal
	// (neither stopped nor wanted stopped); it gives a job its status without
	// a scan. Node sets do not keep it.
	live int
}

// lastIndex is nil-safe: a node or job without allocations reports index 1
// rather than 0, so a blocking query on it waits instead of returning.
func (s *allocSet) lastIndex() uint64 {
	if s == nil || s.index == 0 {
		return 1
	}
	return s.index
}

// setChange accumulates one transaction's changes to one set.
type setChange struct {
	old     *allocSet
	added   []string
	removed map[string]struct{}
	bumped  bool
	live    int
}

// setChanges accumulates a transaction's changes to the sets of one table.
type setChanges struct {
	table   string
	changes map[string]*setChange
}

func newSetChanges(table string) *setChanges {
	return &setChanges{table: table, changes: make(map[string]*setChange)}
}

func (c *setChanges) get(tx *txn, key string) *setChange {
	ch, ok := c.changes[key]
	if !ok {
		_, obj, err := tx.db.FirstWatch(c.table, indexID, key)
		mustRead(err, c.table, indexID)
		old, _ := obj.(*allocSet)
		ch = &setChange{old: old}
		c.changes[key] = ch
	}
	return ch
}

// flush writes the new rows. It reports, per key, the new row.
func (c *setChanges) flush(tx *txn) map[string]*allocSet {
	rows := make(map[string]*allocSet, len(c.changes))
	for _, key := range sortedKeys(c.changes) {
		ch := c.changes[key]
		row := ch.apply(key, tx.index)
		if err := tx.db.Insert(c.table, row); err != nil {
			panic("state: write " + c.table + ": " + err.Error())
		}
		rows[key] = row
	}
	return rows
}

// apply builds the new row: the old ids minus removed, merged with added.
func (ch *setChange) apply(key string, index uint64) *allocSet {
	row := &allocSet{key: key, index: index}
	var oldIDs []string
	if ch.old != nil {
		oldIDs = ch.old.ids
		row.live = ch.old.live
		if !ch.bumped && len(ch.added) == 0 && len(ch.removed) == 0 {
			row.index = ch.old.index
		}
	}
	row.live += ch.live
	if len(ch.added) == 0 && len(ch.removed) == 0 {
		row.ids = oldIDs
		return row
	}
	slices.Sort(ch.added)
	ids := make([]string, 0, len(oldIDs)+len(ch.added)-len(ch.removed))
	i, j := 0, 0
	for i < len(oldIDs) || j < len(ch.added) {
		var next string
		if j == len(ch.added) || (i < len(oldIDs) && oldIDs[i] < ch.added[j]) {
			next = oldIDs[i]
			i++
		} else {
			next = ch.added[j]
			j++
		}
		if _, gone := ch.removed[next]; !gone {
			ids = append(ids, next)
		}
	}
	row.ids = ids
	return row
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isLive reports whether an allocation counts toward its job running.
func isLive(a *droverv1.Allocation) bool {
	return a != nil && !a.Terminal()
}

// trackAlloc records in the node and job sets that an allocation was
// created (before nil), changed, or deleted (after nil). serverSide says
// whether the servers made the change (as opposed to an agent's report).
// Only server-side changes and membership changes touch the node set, whose
// index agents' GetAllocs waits on; an agent's own report never wakes it.
func (tx *txn) trackAlloc(before, after *droverv1.Allocation, serverSide bool) {
	a := after
	if a == nil {
		a = before
	}
	tx.trackIP(before, after)
	job := tx.jobSets.get(tx, a.GetJobId())
	job.bumped = true
	if isLive(after) {
		job.live++
	}
	if isLive(before) {
		job.live--
	}
	if !serverSide && before != nil && after != nil {
		return
	}
	node := tx.nodeSets.get(tx, a.GetNodeId())
	node.bumped = true
	switch {
	case before == nil:
		node.added = append(node.added, a.GetId())
		job.added = append(job.added, a.GetId())
	case after == nil:
		node.remove(a.GetId())
		job.remove(a.GetId())
	}
}

func (ch *setChange) remove(id string) {
	if ch.removed == nil {
		ch.removed = make(map[string]struct{})
	}
	ch.removed[id] = struct{}{}
	ch.bumped = true
}
