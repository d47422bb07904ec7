package state

import (
	"slices"
	"strings"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// allocSet is a row of the derived node_allocs or job_allocs table: the
// allocations on one node or of one job. It replaces a go-memdb secondary
// index over allocations, which would cost one radix-tree entry (about 450
// bytes) per allocation per index; a set costs one pointer per allocation.
// Holding the allocations themselves, not their ids, makes reading a node's
// allocations (the scheduler's and plan applier's hottest read) a copy of
// the row instead of one radix lookup per allocation. It also gives
// blocking queries one row to watch per node.
//
// Rows are immutable like every stored object; a write transaction builds a
// new row when it changes a set, including when an allocation in it is
// replaced by a newer version.
type allocSet struct {
	// key is the node id or job id.
	key string
	// allocs are the current versions, sorted by id.
	allocs []*droverv1.Allocation
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

// allocMark is a row of the derived node_alloc_marks table: the index of a
// node's allocation set, written only when it moves.
type allocMark struct {
	key   string
	index uint64
}

// setChange accumulates one transaction's changes to one set.
type setChange struct {
	old      *allocSet
	added    []*droverv1.Allocation
	removed  map[string]struct{}
	replaced map[string]*droverv1.Allocation
	bumped   bool
	live     int
}

// setChanges accumulates a transaction's changes to the sets of one table.
type setChanges struct {
	table   string
	changes map[string]*setChange
	// ownerExists reports whether the node or job a row belongs to still
	// exists; an empty row of a deleted owner is dropped, not written.
	ownerExists func(tx *txn, key string) bool
	// marks, when set, is the table of allocMark rows that follow the
	// rows' indexes.
	marks string
}

func newSetChanges(table string, ownerExists func(tx *txn, key string) bool) *setChanges {
	return &setChanges{table: table, changes: make(map[string]*setChange), ownerExists: ownerExists}
}

// withMarks makes the sets keep an allocMark row per set in table.
func (c *setChanges) withMarks(table string) *setChanges {
	c.marks = table
	return c
}

// peek returns the allocations of a set as the transaction leaves them so
// far, without recording a change of the set.
func (c *setChanges) peek(tx *txn, key string) []*droverv1.Allocation {
	if ch, ok := c.changes[key]; ok {
		return ch.apply(key, tx.index).allocs
	}
	_, obj, err := tx.db.FirstWatch(c.table, indexID, key)
	mustRead(err, c.table, indexID)
	set, _ := obj.(*allocSet)
	if set == nil {
		return nil
	}
	return set.allocs
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
		if len(row.allocs) == 0 && !c.ownerExists(tx, key) {
			if ch.old != nil {
				if err := tx.db.Delete(c.table, ch.old); err != nil {
					panic("state: delete from " + c.table + ": " + err.Error())
				}
				c.deleteMark(tx, key)
			}
			continue
		}
		if err := tx.db.Insert(c.table, row); err != nil {
			panic("state: write " + c.table + ": " + err.Error())
		}
		if ch.old == nil || ch.old.index != row.index {
			c.writeMark(tx, row)
		}
		rows[key] = row
	}
	return rows
}

// writeMark records the row's index in the marks table, if any.
func (c *setChanges) writeMark(tx *txn, row *allocSet) {
	if c.marks == "" {
		return
	}
	if err := tx.db.Insert(c.marks, &allocMark{key: row.key, index: row.index}); err != nil {
		panic("state: write " + c.marks + ": " + err.Error())
	}
}

// deleteMark drops the mark of a deleted row, if any.
func (c *setChanges) deleteMark(tx *txn, key string) {
	if c.marks == "" {
		return
	}
	if _, err := tx.db.DeleteAll(c.marks, indexID, key); err != nil {
		panic("state: delete from " + c.marks + ": " + err.Error())
	}
}

// apply builds the new row: the old allocations minus removed, merged with
// added, each replaced by its newest version. The index moves only when
// the change was bumped or the membership changed.
func (ch *setChange) apply(key string, index uint64) *allocSet {
	row := &allocSet{key: key, index: index}
	var old []*droverv1.Allocation
	membership := len(ch.added) > 0 || len(ch.removed) > 0
	if ch.old != nil {
		old = ch.old.allocs
		row.live = ch.old.live
		if !ch.bumped && !membership {
			row.index = ch.old.index
		}
	}
	row.live += ch.live
	if !membership && len(ch.replaced) == 0 {
		row.allocs = old
		return row
	}
	if !membership {
		// Reports and in-place changes only: copy the row and put each
		// new version in its place, rather than look every allocation of
		// a job of thousands up in the map for a few changed ones.
		row.allocs = slices.Clone(old)
		for id, a := range ch.replaced {
			if i, found := slices.BinarySearchFunc(row.allocs, id, byAllocIDKey); found {
				row.allocs[i] = a
			}
		}
		return row
	}
	slices.SortFunc(ch.added, byAllocID)
	allocs := make([]*droverv1.Allocation, 0, len(old)+len(ch.added))
	i, j := 0, 0
	for i < len(old) || j < len(ch.added) {
		var next *droverv1.Allocation
		if j == len(ch.added) || (i < len(old) && old[i].GetId() < ch.added[j].GetId()) {
			next = old[i]
			i++
		} else {
			next = ch.added[j]
			j++
		}
		if len(ch.removed) > 0 {
			if _, gone := ch.removed[next.GetId()]; gone {
				continue
			}
		}
		if len(ch.replaced) > 0 {
			if newer, ok := ch.replaced[next.GetId()]; ok {
				next = newer
			}
		}
		allocs = append(allocs, next)
	}
	row.allocs = allocs
	return row
}

func byAllocID(a, b *droverv1.Allocation) int { return strings.Compare(a.GetId(), b.GetId()) }

func byAllocIDKey(a *droverv1.Allocation, id string) int { return strings.Compare(a.GetId(), id) }

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
// Only server-side changes and membership changes move the node set's
// index, which agents' GetAllocs waits on: an agent's own report replaces
// the allocation in the row but never answers its wait.
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
	node := tx.nodeSets.get(tx, a.GetNodeId())
	if serverSide {
		node.bumped = true
	}
	for _, ch := range []*setChange{job, node} {
		switch {
		case before == nil:
			ch.added = append(ch.added, after)
		case after == nil:
			ch.remove(before.GetId())
		default:
			ch.replace(after)
		}
	}
}

func (ch *setChange) remove(id string) {
	if ch.removed == nil {
		ch.removed = make(map[string]struct{})
	}
	ch.removed[id] = struct{}{}
	ch.bumped = true
}

// replace records a newer version of an allocation already in the set, or
// added earlier in the same transaction.
func (ch *setChange) replace(a *droverv1.Allocation) {
	if ch.replaced == nil {
		ch.replaced = make(map[string]*droverv1.Allocation)
	}
	ch.replaced[a.GetId()] = a
}
