package state

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/google/btree"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// allocSet is one node's or one job's derived set: the allocations on the
// node (an item of the node_set_tree's B-tree, nodesettree.go) or of the
// job (a row of the job_allocs table). It replaces a go-memdb secondary
// index over allocations, which would cost one radix-tree entry (about 450
// bytes) per allocation per index.
//
// A node's row holds the allocations themselves, not only their ids: reading
// a node's allocations is the scheduler's and plan applier's hottest read,
// and this makes it a copy of the row instead of a lookup per allocation.
// A job's row holds only the ids. Agents' reports change allocations far
// more often than anything adds or removes them, and a row that held a job
// of a thousand allocations had to be copied, and searched by id, for every
// raft entry that carried a report of any of them; a row of ids stays as it
// is until the job's membership changes. Readers of a job's allocations
// (an evaluation, the API) look each id up in the allocation tree.
//
// Rows are immutable like every stored object; a write transaction builds a
// new row when it changes a set, including, in a node's row, when an
// allocation in it is replaced by a newer version. Both also give blocking
// queries one row to watch per node or job.
type allocSet struct {
	// key is the node id or job id.
	key string
	// ids are the allocations' ids, sorted; allocs, in node rows only, are
	// their current versions in the same order.
	ids    []allocKey
	allocs []*droverv1.Allocation
	// index is the raft index of the last change the set tracks: for nodes
	// the last server-side change to one of its allocations, for jobs the
	// last change of any kind.
	index uint64
	// live counts, in job sets, the allocations that are not terminal
	// (neither stopped nor wanted stopped); it gives a job its status without
	// a scan. Node sets do not keep it.
	live int
	// resolved caches, in job rows, the allocations the ids name. Every
	// change to any of a job's allocations writes a new row, so what a row
	// resolves to is the same in every snapshot it is current in, and a job
	// read again before it changes costs no lookup.
	resolved atomic.Pointer[[]*droverv1.Allocation]
	// moved, in node rows, is closed once a later write moves the set's
	// index or removes the set: what a blocking query on the node's
	// allocations waits on. A row that keeps the index (an agent's report
	// replaced an allocation) keeps the channel.
	moved chan struct{}
}

// rowShared is a node set's row as NodeAllocsShared returns it: nil for
// a node without allocations; nil-safe.
func (s *allocSet) rowShared() []*droverv1.Allocation {
	if s == nil || len(s.allocs) == 0 {
		return nil
	}
	return s.allocs
}

// size is how many allocations the set holds; nil-safe.
func (s *allocSet) size() int {
	if s == nil {
		return 0
	}
	return len(s.ids)
}

// lastIndex is nil-safe: a node or job without allocations reports index 1
// rather than 0, so a blocking query on it waits instead of returning.
func (s *allocSet) lastIndex() uint64 {
	if s == nil || s.index == 0 {
		return 1
	}
	return s.index
}

// resolve returns the set's allocations in id order: the row's own when it
// holds them (shared: callers must not modify it), else each id looked up
// in tree, the allocation tree of the same point in time.
func (s *allocSet) resolve(tree *btree.BTreeG[allocItem]) []*droverv1.Allocation {
	if s.size() == 0 {
		return nil
	}
	if s.allocs != nil {
		return s.allocs
	}
	out := make([]*droverv1.Allocation, 0, len(s.ids))
	for _, k := range s.ids {
		if it, ok := tree.Get(allocItem{key: k}); ok {
			out = append(out, it.alloc)
		}
	}
	return out
}

// resolveShared is resolve for a stored row read from a snapshot whose
// tree is tree, cached in the row: the result is shared, callers must not
// modify it. Write transactions use resolve: the rows they read are mostly
// rows they are building, which no later reader sees.
func (s *allocSet) resolveShared(tree *btree.BTreeG[allocItem]) []*droverv1.Allocation {
	if s.size() == 0 || s.allocs != nil {
		return s.resolve(tree)
	}
	if p := s.resolved.Load(); p != nil {
		return *p
	}
	out := s.resolve(tree)
	s.resolved.Store(&out)
	return out
}

// allocMark is a row of the derived node_alloc_marks table: there is one
// for every node that has a set, written when the set is created. A
// blocking query on a node without a set watches the place of its mark.
type allocMark struct {
	key string
}

// setChange accumulates one transaction's changes to one set.
type setChange struct {
	old      *allocSet
	added    []allocItem
	removed  map[allocKey]struct{}
	replaced map[allocKey]*droverv1.Allocation
	bumped   bool
	live     int
}

// setRows is where the sets of one kind are stored.
type setRows interface {
	// load returns the stored set of key, nil if there is none.
	load(tx *txn, key string) *allocSet
	// store writes row; remove deletes it.
	store(tx *txn, row *allocSet)
	remove(tx *txn, row *allocSet)
}

// tableRows stores sets as the rows of a go-memdb table, each with its own
// watch: a job's row is what a blocking query on its allocations watches.
type tableRows string

func (t tableRows) load(tx *txn, key string) *allocSet {
	_, obj, err := tx.db.FirstWatch(string(t), indexID, key)
	mustRead(err, string(t), indexID)
	set, _ := obj.(*allocSet)
	return set
}

func (t tableRows) store(tx *txn, row *allocSet) {
	if err := tx.db.Insert(string(t), row); err != nil {
		panic("state: write " + string(t) + ": " + err.Error())
	}
}

func (t tableRows) remove(tx *txn, row *allocSet) {
	if err := tx.db.Delete(string(t), row); err != nil {
		panic("state: delete from " + string(t) + ": " + err.Error())
	}
}

// setChanges accumulates a transaction's changes to the sets of one kind.
type setChanges struct {
	rows setRows
	// holdsAllocs says whether the rows hold the allocations as well as
	// their ids.
	holdsAllocs bool
	changes     map[string]*setChange
	// ownerExists reports whether the node or job a row belongs to still
	// exists; an empty row of a deleted owner is dropped, not written.
	ownerExists func(tx *txn, key string) bool
	// marks, when set, is the table of allocMark rows that follow which
	// sets exist, and says that the rows carry a moved channel.
	marks string
	// moved are the channels of replaced rows to close on commit.
	moved []chan struct{}
}

func newSetChanges(rows setRows, holdsAllocs bool, ownerExists func(tx *txn, key string) bool) *setChanges {
	return &setChanges{rows: rows, holdsAllocs: holdsAllocs, changes: make(map[string]*setChange), ownerExists: ownerExists}
}

// withMarks makes the sets keep an allocMark row per set in table, and a
// moved channel in each row.
func (c *setChanges) withMarks(table string) *setChanges {
	c.marks = table
	return c
}

// peek returns the allocations of a set as the transaction leaves them so
// far, without recording a change of the set.
func (c *setChanges) peek(tx *txn, key string) []*droverv1.Allocation {
	if ch, ok := c.changes[key]; ok {
		return ch.apply(key, tx.index, c.holdsAllocs).resolve(tx.allocs())
	}
	return c.rows.load(tx, key).resolve(tx.allocs())
}

func (c *setChanges) get(tx *txn, key string) *setChange {
	ch, ok := c.changes[key]
	if !ok {
		ch = &setChange{old: c.rows.load(tx, key)}
		c.changes[key] = ch
	}
	return ch
}

// flush writes the new rows. It reports, per key, the new row.
func (c *setChanges) flush(tx *txn) map[string]*allocSet {
	rows := make(map[string]*allocSet, len(c.changes))
	for _, key := range sortedKeys(c.changes) {
		ch := c.changes[key]
		row := ch.apply(key, tx.index, c.holdsAllocs)
		if row.size() == 0 && !c.ownerExists(tx, key) {
			if ch.old != nil {
				c.rows.remove(tx, ch.old)
				c.unmark(tx, ch.old)
			}
			continue
		}
		c.mark(tx, ch.old, row)
		c.rows.store(tx, row)
		rows[key] = row
	}
	c.closeMovedOnCommit(tx)
	return rows
}

// mark gives row, replacing old (nil for a new set), its moved channel: the
// old row's while the index stays, else a new one, the old one to close on
// commit. A new set gets its allocMark. Sets without marks have neither.
//
// Before the channel, every move of a node's index rewrote its allocMark
// for the row's go-memdb watch; at a plan's few hundred nodes that insert
// was 3-4% of each server's CPU under concurrent jobs.
func (c *setChanges) mark(tx *txn, old, row *allocSet) {
	if c.marks == "" {
		return
	}
	switch {
	case old == nil:
		row.moved = make(chan struct{})
		if err := tx.db.Insert(c.marks, &allocMark{key: row.key}); err != nil {
			panic("state: write " + c.marks + ": " + err.Error())
		}
	case old.index == row.index && old.moved != nil:
		row.moved = old.moved
	default:
		row.moved = make(chan struct{})
		c.moved = append(c.moved, old.moved)
	}
}

// unmark drops the mark of a removed row, its channel to close on commit.
func (c *setChanges) unmark(tx *txn, old *allocSet) {
	if c.marks == "" {
		return
	}
	if _, err := tx.db.DeleteAll(c.marks, indexID, old.key); err != nil {
		panic("state: delete from " + c.marks + ": " + err.Error())
	}
	c.moved = append(c.moved, old.moved)
}

// closeMovedOnCommit closes the replaced rows' channels once the
// transaction commits, after the new rows are visible, so a woken query
// reads them; an aborted transaction closes none.
func (c *setChanges) closeMovedOnCommit(tx *txn) {
	moved := c.moved
	c.moved = nil
	if len(moved) == 0 {
		return
	}
	tx.db.Defer(func() {
		for _, ch := range moved {
			if ch != nil {
				close(ch)
			}
		}
	})
}

// apply builds the new row: the old allocations minus removed, merged with
// added, each replaced by its newest version when the row holds them. The
// index moves only when the change was bumped or the membership changed.
func (ch *setChange) apply(key string, index uint64, holdsAllocs bool) *allocSet {
	row := &allocSet{key: key, index: index}
	var oldIDs []allocKey
	var oldAllocs []*droverv1.Allocation
	membership := len(ch.added) > 0 || len(ch.removed) > 0
	if ch.old != nil {
		oldIDs, oldAllocs = ch.old.ids, ch.old.allocs
		row.live = ch.old.live
		if !ch.bumped && !membership {
			row.index = ch.old.index
		}
	}
	row.live += ch.live
	if !membership {
		row.ids, row.allocs = oldIDs, oldAllocs
		if holdsAllocs && len(ch.replaced) > 0 {
			// Reports and in-place changes only: the ids stay, and each
			// new version takes its place in a copy of the allocations.
			row.allocs = slices.Clone(oldAllocs)
			for k, a := range ch.replaced {
				if i, found := slices.BinarySearchFunc(row.ids, k, compareAllocKeys); found {
					row.allocs[i] = a
				}
			}
		}
		return row
	}
	slices.SortFunc(ch.added, func(a, b allocItem) int { return compareAllocKeys(a.key, b.key) })
	row.ids = make([]allocKey, 0, len(oldIDs)+len(ch.added))
	if holdsAllocs {
		row.allocs = make([]*droverv1.Allocation, 0, len(oldIDs)+len(ch.added))
	}
	i, j := 0, 0
	for i < len(oldIDs) || j < len(ch.added) {
		var next allocItem
		if j == len(ch.added) || (i < len(oldIDs) && compareAllocKeys(oldIDs[i], ch.added[j].key) < 0) {
			next.key = oldIDs[i]
			if holdsAllocs {
				next.alloc = oldAllocs[i]
			}
			i++
		} else {
			next = ch.added[j]
			j++
		}
		if _, gone := ch.removed[next.key]; gone {
			continue
		}
		row.ids = append(row.ids, next.key)
		if holdsAllocs {
			if newer, ok := ch.replaced[next.key]; ok {
				next.alloc = newer
			}
			row.allocs = append(row.allocs, next.alloc)
		}
	}
	return row
}

// compareAllocKeys orders ids as their text orders them.
func compareAllocKeys(a, b allocKey) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
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

// trackAlloc records in the node and job sets that the allocation with id
// key was created (before nil), changed, or deleted (after nil). serverSide
// says whether the servers made the change (as opposed to an agent's
// report). Only server-side changes and membership changes move the node
// set's index, which agents' GetAllocs waits on: an agent's own report
// replaces the allocation in the row but never answers its wait.
func (tx *txn) trackAlloc(key allocKey, before, after *droverv1.Allocation, serverSide bool) {
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
	tx.jobSets.record(job, key, before, after)
	tx.nodeSets.record(node, key, before, after)
}

// record notes in ch, a change of one of c's sets, that the allocation
// with id key was created, changed or deleted.
func (c *setChanges) record(ch *setChange, key allocKey, before, after *droverv1.Allocation) {
	switch {
	case before == nil:
		ch.added = append(ch.added, allocItem{key: key, alloc: after})
	case after == nil:
		ch.remove(key)
	case c.holdsAllocs:
		ch.replace(key, after)
	}
}

func (ch *setChange) remove(key allocKey) {
	if ch.removed == nil {
		ch.removed = make(map[allocKey]struct{})
	}
	ch.removed[key] = struct{}{}
	ch.bumped = true
}

// replace records a newer version of an allocation already in the set, or
// added earlier in the same transaction.
func (ch *setChange) replace(key allocKey, a *droverv1.Allocation) {
	if ch.replaced == nil {
		ch.replaced = make(map[allocKey]*droverv1.Allocation)
	}
	ch.replaced[key] = a
}
