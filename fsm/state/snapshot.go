package state

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/btree"
	"github.com/hashicorp/go-memdb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Snapshot is a read-only, point-in-time view of the state store. Reads
// return shared immutable objects: never modify them. A Snapshot made by
// BlockingQuery also records a watch channel for everything it reads.
//
// A Snapshot made by BlockingQuery is not safe for concurrent use. One
// without a watch set may be read from several goroutines (schedulers
// racing from the same state, in tests): its go-memdb transaction only
// reads, and what it loads lazily it loads atomically.
type Snapshot struct {
	txn       *memdb.Txn
	ws        memdb.WatchSet
	index     uint64
	rebuiltAt uint64
	// allocs is the allocation tree, loaded on first use; allocsWatched
	// says whether ws already watches it.
	allocs        atomic.Pointer[btree.BTreeG[allocItem]]
	allocsWatched bool
	// nodeSets is the tree of node sets, loaded on first use.
	nodeSets atomic.Pointer[btree.BTreeG[nodeSetItem]]
}

// Index is the raft index of the last entry applied when the snapshot was
// taken. The snapshot holds at least that entry's writes.
func (s *Snapshot) Index() uint64 { return s.index }

// RebuiltAt is the raft index at which this server last rebuilt the whole
// state from a snapshot (at start-up, from one raft installed, or from a
// restored backup), zero if never. Objects keep the modify indexes they
// were written at through a rebuild, and a backup's are older than the
// indexes clients saw before it was restored: an index a client holds from
// before RebuiltAt says nothing about which objects changed since.
func (s *Snapshot) RebuiltAt() uint64 { return s.rebuiltAt }

// TableIndex returns the raft index of the last write to table, or zero.
func (s *Snapshot) TableIndex(table string) uint64 {
	if t := first[*tableIndex](s, TableIndex, indexID, table); t != nil {
		return t.index
	}
	return 0
}

// TableIndexes iterates the index table: each table's name and the raft
// index of its last write.
func (s *Snapshot) TableIndexes() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for t := range all[*tableIndex](s, TableIndex, indexID) {
			if !yield(t.table, t.index) {
				return
			}
		}
	}
}

// first returns the row of table whose index matches args, or the zero T,
// and adds the row's watch to the snapshot's watch set.
func first[T any](s *Snapshot, table, index string, args ...any) T {
	watch, row := unwatched[T](s, table, index, args...)
	s.watch(watch)
	return row
}

// unwatched returns what first does and the row's watch channel, without
// adding it to the snapshot's watch set.
func unwatched[T any](s *Snapshot, table, index string, args ...any) (<-chan struct{}, T) {
	var zero T
	watch, obj, err := s.txn.FirstWatch(table, index, args...)
	// go-memdb wraps indexer errors with %v, which drops the chain, so a
	// malformed key (a node id prefix, say) is recognised by its text.
	if err != nil && (errors.Is(err, errInvalidKey) || strings.Contains(err.Error(), errInvalidKey.Error())) {
		return nil, zero
	}
	mustRead(err, table, index)
	if obj == nil {
		return watch, zero
	}
	return watch, obj.(T)
}

// all iterates the rows of table whose index matches args, in key order.
// Each range over the result runs the lookup afresh, so it may be ranged
// over more than once.
func all[T any](s *Snapshot, table, index string, args ...any) iter.Seq[T] {
	return func(yield func(T) bool) {
		it, err := s.txn.Get(table, index, args...)
		mustRead(err, table, index)
		s.watch(it.WatchCh())
		for obj := it.Next(); obj != nil; obj = it.Next() {
			if !yield(obj.(T)) {
				return
			}
		}
	}
}

func (s *Snapshot) watch(ch <-chan struct{}) {
	if s.ws != nil && ch != nil {
		s.ws.Add(ch)
	}
}

// mustRead panics on a memdb read error. Reads fail only for a table or
// index missing from the schema or an argument of the wrong type, which are
// bugs in this package, not conditions callers can handle; malformed ids from
// callers are handled as "not found" before this point.
func mustRead(err error, table, index string) {
	if err != nil {
		panic(fmt.Sprintf("state: read %s.%s: %v", table, index, err))
	}
}

// Page is one page of a listing in id order.
type Page struct {
	// Prefix keeps only ids that start with it.
	Prefix string
	// Size is the most items returned; zero or less means no limit.
	Size int
	// After is the next token from the previous page: the first id to return.
	After string
}

// Paginate collects items from seq, which yields items in id order, whose
// id (from key) starts with p.Prefix and is not before p.After, until
// p.Size are collected. It returns the id of the next item, if any, as the
// token for the next page.
func Paginate[T any](seq iter.Seq[T], key func(T) string, p Page) (items []T, next string) {
	start := pageStart(p)
	for item := range seq {
		id := key(item)
		if id < start {
			continue
		}
		if !strings.HasPrefix(id, p.Prefix) {
			// Keys are in id order: past the prefix nothing more matches.
			if id > p.Prefix {
				break
			}
			continue
		}
		if p.Size > 0 && len(items) == p.Size {
			return items, id
		}
		items = append(items, item)
	}
	return items, ""
}

// pageStart is where a paged scan begins: the later of the prefix and the
// next-page token.
func pageStart(p Page) string {
	return max(p.Prefix, p.After)
}

// listUUID pages through a table keyed by uuidIndex.
func listUUID[T any](s *Snapshot, table string, key func(T) string, p Page) ([]T, string) {
	start, ok := uuidLowerBound(pageStart(p))
	if !ok {
		return nil, ""
	}
	it, err := s.txn.LowerBound(table, indexID, uuidText(start))
	mustRead(err, table, indexID)
	s.watch(s.tableWatch(table))
	return Paginate(func(yield func(T) bool) {
		for obj := it.Next(); obj != nil; obj = it.Next() {
			if !yield(obj.(T)) {
				return
			}
		}
	}, key, p)
}

// uuidText formats a uuidIndex key back into UUID text for LowerBound,
// which takes index arguments rather than keys.
func uuidText(key []byte) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(36)
	for i, c := range key {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			b.WriteByte('-')
		}
		b.WriteByte(hexDigits[c])
	}
	return b.String()
}

// tableWatch returns the watch channel of the index table's row for table,
// which fires on any write to the table: the right granularity for listings.
func (s *Snapshot) tableWatch(table string) <-chan struct{} {
	watch, _, err := s.txn.FirstWatch(TableIndex, indexID, table)
	mustRead(err, TableIndex, indexID)
	return watch
}

// NodeByID returns the node, or nil.
func (s *Snapshot) NodeByID(id string) *droverv1.Node {
	return first[*droverv1.Node](s, TableNodes, indexID, id)
}

// Nodes iterates all nodes in id order.
func (s *Snapshot) Nodes() iter.Seq[*droverv1.Node] {
	return all[*droverv1.Node](s, TableNodes, indexID)
}

// DrainingNodes returns the nodes with a drain in progress, in id order.
func (s *Snapshot) DrainingNodes() iter.Seq[*droverv1.Node] {
	return all[*droverv1.Node](s, TableNodes, indexDraining)
}

// JobByID returns the current version of the job, or nil.
func (s *Snapshot) JobByID(id string) *droverv1.Job {
	return first[*droverv1.Job](s, TableJobs, indexID, id)
}

// Jobs iterates all jobs in id order.
func (s *Snapshot) Jobs() iter.Seq[*droverv1.Job] {
	return all[*droverv1.Job](s, TableJobs, indexID)
}

// JobsByType returns the jobs of one type, in id order.
func (s *Snapshot) JobsByType(t droverv1.JobType) iter.Seq[*droverv1.Job] {
	return all[*droverv1.Job](s, TableJobs, indexType, int64(t))
}

// ListJobs returns one page of jobs.
func (s *Snapshot) ListJobs(p Page) ([]*droverv1.Job, string) {
	it, err := s.txn.LowerBound(TableJobs, indexID, pageStart(p))
	mustRead(err, TableJobs, indexID)
	s.watch(s.tableWatch(TableJobs))
	return Paginate(func(yield func(*droverv1.Job) bool) {
		for obj := it.Next(); obj != nil; obj = it.Next() {
			if !yield(obj.(*droverv1.Job)) {
				return
			}
		}
	}, (*droverv1.Job).GetId, p)
}

// JobVersion returns one version of a job, or nil.
func (s *Snapshot) JobVersion(id string, version uint64) *droverv1.Job {
	if v := first[*jobVersion](s, TableJobVersions, indexID, id, version); v != nil {
		return v.job
	}
	return nil
}

// JobVersions iterates the stored versions of a job, oldest first.
func (s *Snapshot) JobVersions(id string) iter.Seq[*droverv1.Job] {
	return func(yield func(*droverv1.Job) bool) {
		for v := range all[*jobVersion](s, TableJobVersions, indexID+"_prefix", id) {
			if !yield(v.job) {
				return
			}
		}
	}
}

// AllJobVersions iterates every stored version of every job, by job id and
// version.
func (s *Snapshot) AllJobVersions() iter.Seq[*droverv1.Job] {
	return func(yield func(*droverv1.Job) bool) {
		for v := range all[*jobVersion](s, TableJobVersions, indexID) {
			if !yield(v.job) {
				return
			}
		}
	}
}

// AllocsByNode returns the allocations on a node, terminal ones included,
// in id order, and the raft index of the last change the servers made to
// them (a placement, a stop, a server-side update or a removal). Agents'
// own status reports do not move that index, and a blocking query built on
// AllocsByNode wakes only when it moves.
func (s *Snapshot) AllocsByNode(nodeID string) ([]*droverv1.Allocation, uint64) {
	set := s.nodeSetWatched(nodeID)
	return s.allocsOf(set), set.lastIndex()
}

// NodeAllocsShared returns the allocations on a node, terminal ones
// included, in id order: the stored row itself, not a copy, for readers
// that only look (the scheduler reads every node's row in every pass). It
// is read-only: callers must not modify it, sort it or append to it.
//
// A row is never changed in place: a write that changes a node's
// allocations (or replaces one by a newer version) stores a new backing
// array, and an unchanged row keeps its array. So while the same array
// (its first element's address) of the same length is returned, the
// node's allocations are the same, which lets callers cache what they
// derive from it.
func (s *Snapshot) NodeAllocsShared(nodeID string) []*droverv1.Allocation {
	return s.nodeSetWatched(nodeID).rowShared()
}

// NodesWithAllocs iterates every node in id order, each with what
// NodeAllocsShared returns for it. Outside a blocking query it reads the
// rows in one ordered walk of the node sets beside the nodes, rather than
// a lookup per node: a scheduler's pass reads every node's row, and in
// the full C1M those lookups were a tenth of the schedulers' CPU. Both walks are in the
// order of node ids, which the id index keeps as the strings sort (it
// holds canonical lowercase UUIDs only, whose digits it keys in order). A
// blocking query looks each row up, which watches it.
func (s *Snapshot) NodesWithAllocs() iter.Seq2[*droverv1.Node, []*droverv1.Allocation] {
	return func(yield func(*droverv1.Node, []*droverv1.Allocation) bool) {
		if s.ws != nil {
			for n := range s.Nodes() {
				if !yield(n, s.NodeAllocsShared(n.GetId())) {
					return
				}
			}
			return
		}
		it, err := s.txn.Get(TableNodes, indexID)
		mustRead(err, TableNodes, indexID)
		next := func() (*droverv1.Node, bool) {
			obj := it.Next()
			if obj == nil {
				return nil, false
			}
			return obj.(*droverv1.Node), true
		}
		n, more := next()
		yieldUpTo := func(key string, set *allocSet) bool {
			for more && n.GetId() < key {
				if !yield(n, nil) {
					return false
				}
				n, more = next()
			}
			if more && n.GetId() == key {
				if !yield(n, set.rowShared()) {
					return false
				}
				n, more = next()
			}
			return true
		}
		stopped := false
		s.storedNodeSets().Ascend(func(it nodeSetItem) bool {
			stopped = !yieldUpTo(it.key, it.set)
			return !stopped && more
		})
		for !stopped && more {
			if !yield(n, nil) {
				return
			}
			n, more = next()
		}
	}
}

// AllocsByJob returns the allocations of a job, in id order, and the raft
// index of the last change to any of them.
func (s *Snapshot) AllocsByJob(jobID string) ([]*droverv1.Allocation, uint64) {
	// The row's watch covers its allocations: its index moves with every
	// change to any of them, so the tree is read unwatched.
	set := first[*allocSet](s, tableJobAllocs, indexID, jobID)
	return slices.Clone(set.resolveShared(s.storedAllocTree())), set.lastIndex()
}

// AllocsByEval returns the allocations an evaluation created or last
// changed, in id order.
func (s *Snapshot) AllocsByEval(evalID string) []*droverv1.Allocation {
	eval := s.EvalByID(evalID)
	if eval == nil {
		return nil
	}
	allocs, _ := s.AllocsByJob(eval.GetJobId())
	var out []*droverv1.Allocation
	for _, a := range allocs {
		if a.GetEvalId() == evalID {
			out = append(out, a)
		}
	}
	return out
}

// allocsOf returns a node's allocations from its row.
func (s *Snapshot) allocsOf(set *allocSet) []*droverv1.Allocation {
	if set.size() == 0 {
		return nil
	}
	// A copy: callers may sort or append to what they get.
	return slices.Clone(set.allocs)
}

// EvalByID returns the evaluation, or nil.
func (s *Snapshot) EvalByID(id string) *droverv1.Evaluation {
	return first[*droverv1.Evaluation](s, TableEvals, indexID, id)
}

// Evals iterates all evaluations in id order.
func (s *Snapshot) Evals() iter.Seq[*droverv1.Evaluation] {
	return all[*droverv1.Evaluation](s, TableEvals, indexID)
}

// ListEvals returns one page of evaluations.
func (s *Snapshot) ListEvals(p Page) ([]*droverv1.Evaluation, string) {
	return listUUID(s, TableEvals, (*droverv1.Evaluation).GetId, p)
}

// EvalsByJob iterates the evaluations of a job, in id order.
func (s *Snapshot) EvalsByJob(jobID string) iter.Seq[*droverv1.Evaluation] {
	return all[*droverv1.Evaluation](s, TableEvals, indexJob, jobID)
}

// ServerByID returns the server's record, or nil.
func (s *Snapshot) ServerByID(id string) *droverv1.ServerMember {
	return first[*droverv1.ServerMember](s, TableServers, indexID, id)
}

// Servers iterates all server records in id order.
func (s *Snapshot) Servers() iter.Seq[*droverv1.ServerMember] {
	return all[*droverv1.ServerMember](s, TableServers, indexID)
}

// JobRequestResult returns the stored result of the job write that carried
// requestID, or nil if there is none (never seen, or expired and dropped).
func (s *Snapshot) JobRequestResult(requestID string) *droverv1.JobRequestResult {
	return first[*droverv1.JobRequestResult](s, TableJobRequests, indexID, requestID)
}

// JobRequestResults iterates all stored job request results in request id
// order.
func (s *Snapshot) JobRequestResults() iter.Seq[*droverv1.JobRequestResult] {
	return all[*droverv1.JobRequestResult](s, TableJobRequests, indexID)
}

// ListNodes returns one page of nodes.
func (s *Snapshot) ListNodes(p Page) ([]*droverv1.Node, string) {
	return listUUID(s, TableNodes, (*droverv1.Node).GetId, p)
}
