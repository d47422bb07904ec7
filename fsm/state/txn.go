package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Change is an object a write created or updated (Object is the new version)
// or deleted (Deleted is set and Object is the last version). Object is one
// of *droverv1.Node, *Job, *Allocation, *Evaluation or *ServerMember. The
// FSM turns changes into events.
type Change struct {
	Table   string
	Object  any
	Created bool
	Deleted bool
}

// txn is one write transaction applying the raft entry at index.
type txn struct {
	db       *memdb.Txn
	index    uint64
	tables   map[string]struct{}
	nodeSets *setChanges
	jobSets  *setChanges
	ipBlocks ipChanges
	// allocWrites is the transaction's view of the allocation tree,
	// nodeSetWrites of the tree of node sets.
	allocWrites   allocWrites
	nodeSetWrites treeWrites[nodeSetItem]
}

func newTxn(db *memdb.MemDB, index uint64) *txn {
	return &txn{
		db:       db.Txn(true),
		index:    index,
		tables:   make(map[string]struct{}),
		nodeSets: newSetChanges(nodeSetStore{}, true, func(tx *txn, id string) bool { return tx.node(id) != nil }).withMarks(tableNodeAllocMarks),
		jobSets:  newSetChanges(tableRows(tableJobAllocs), false, func(tx *txn, id string) bool { return tx.job(id) != nil }),
		ipBlocks: make(ipChanges),
	}
}

// write runs fn in one write transaction for the raft entry at index and
// commits it. If fn fails nothing it wrote is kept. Either way the entry
// counts as applied, so that SnapshotMinIndex waiters on it proceed.
func (s *StateStore) write(index uint64, fn func(*txn) error) ([]Change, error) {
	defer s.markApplied(index)
	tx := newTxn(s.db.Load(), index)
	tx.db.TrackChanges()
	tx.allocWrites.track = true
	if err := fn(tx); err != nil {
		tx.db.Abort()
		return nil, err
	}
	if err := tx.finish(); err != nil {
		tx.db.Abort()
		return nil, err
	}
	changes := tx.changes()
	tx.db.Commit()
	s.nodes.Add(int64(nodeDelta(changes)))
	return changes, nil
}

// nodeDelta is how many nodes the changes added, less those they deleted.
func nodeDelta(changes []Change) int {
	delta := 0
	for _, c := range changes {
		if c.Table != TableNodes {
			continue
		}
		switch {
		case c.Deleted:
			delta--
		case c.Created:
			delta++
		}
	}
	return delta
}

// insert writes obj to table. Errors come from indexers rejecting the
// object (such as a malformed id) and mean the entry is invalid.
func (tx *txn) insert(table string, obj any) error {
	if err := tx.db.Insert(table, obj); err != nil {
		return fmt.Errorf("%w: write %s: %v", ErrInvalidEntry, table, err)
	}
	tx.tables[table] = struct{}{}
	return nil
}

// delete removes obj from table.
func (tx *txn) delete(table string, obj any) error {
	if err := tx.db.Delete(table, obj); err != nil {
		return fmt.Errorf("delete from %s: %w", table, err)
	}
	tx.tables[table] = struct{}{}
	return nil
}

// finish writes what the transaction's changes imply: the node and job
// allocation sets, job statuses that follow from them, and the index table.
func (tx *txn) finish() error {
	jobRows := tx.jobSets.flush(tx)
	for _, jobID := range sortedKeys(jobRows) {
		if err := tx.refreshJobStatus(jobID, jobRows[jobID]); err != nil {
			return err
		}
	}
	tx.nodeSets.flush(tx)
	if err := tx.flushNodeSetRows(); err != nil {
		return fmt.Errorf("write node allocation sets: %w", err)
	}
	tx.flushIPs()
	if err := tx.flushAllocs(); err != nil {
		return fmt.Errorf("write allocations: %w", err)
	}
	for _, table := range sortedKeys(tx.tables) {
		if err := tx.db.Insert(TableIndex, &tableIndex{table: table, index: tx.index}); err != nil {
			return fmt.Errorf("write index of %s: %w", table, err)
		}
	}
	return nil
}

// changes lists the object changes of the transaction, in a stable order.
func (tx *txn) changes() []Change {
	var out []Change
	for _, ch := range tx.db.Changes() {
		switch ch.Table {
		case TableNodes, TableJobs, TableEvals, TableServers, TableDeployments:
		default:
			continue
		}
		if ch.Deleted() {
			out = append(out, Change{Table: ch.Table, Object: ch.Before, Deleted: true})
		} else {
			out = append(out, Change{Table: ch.Table, Object: ch.After, Created: ch.Created()})
		}
	}
	return append(out, tx.allocChanges()...)
}

// get reads one row of table inside the transaction (seeing its own writes).
func get[T any](tx *txn, table string, args ...any) T {
	var zero T
	obj, err := tx.db.First(table, indexID, args...)
	if err != nil {
		// Malformed ids cannot match anything.
		return zero
	}
	if obj == nil {
		return zero
	}
	return obj.(T)
}

func (tx *txn) node(id string) *droverv1.Node { return get[*droverv1.Node](tx, TableNodes, id) }
func (tx *txn) job(id string) *droverv1.Job   { return get[*droverv1.Job](tx, TableJobs, id) }
func (tx *txn) eval(id string) *droverv1.Evaluation {
	return get[*droverv1.Evaluation](tx, TableEvals, id)
}
func (tx *txn) jobVersion(id string, version uint64) *droverv1.Job {
	if v := get[*jobVersion](tx, TableJobVersions, id, version); v != nil {
		return v.job
	}
	return nil
}
func (tx *txn) jobSet(id string) *allocSet { return get[*allocSet](tx, tableJobAllocs, id) }
func (tx *txn) server(id string) *droverv1.ServerMember {
	return get[*droverv1.ServerMember](tx, TableServers, id)
}
func (tx *txn) jobRequest(requestID string) *droverv1.JobRequestResult {
	return get[*droverv1.JobRequestResult](tx, TableJobRequests, requestID)
}
