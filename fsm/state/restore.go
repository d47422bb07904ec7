package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Restorer rebuilds the state from a raft snapshot into a new database;
// Commit swaps it in for the old one in a single step, so readers see either
// the old state or the new, never a mix. Restore is not safe to run
// concurrently with writes; raft never does.
type Restorer struct {
	s     *StateStore
	db    *memdb.MemDB
	tx    *txn
	refs  *refCache
	nodes int
}

// Restore starts rebuilding the state. Call the record methods, then Commit
// or Abort.
func (s *StateStore) Restore() (*Restorer, error) {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, fmt.Errorf("create state database for restore: %w", err)
	}
	tx := newTxn(db, 0)
	return &Restorer{s: s, db: db, tx: tx, refs: newRefCache(tx)}, nil
}

// Node restores a node.
func (r *Restorer) Node(n *droverv1.Node) error {
	r.nodes++
	return r.tx.insert(TableNodes, n)
}

// Job restores the current version of a job.
func (r *Restorer) Job(j *droverv1.Job) error { return r.tx.insert(TableJobs, j) }

// JobVersion restores one stored version of a job.
func (r *Restorer) JobVersion(j *droverv1.Job) error {
	return r.tx.insert(TableJobVersions, &jobVersion{job: j})
}

// Alloc restores an allocation and adds it to its node and job sets.
// Restoring allocations after the nodes, job versions and evaluations they
// refer to lets them share those objects' id strings.
func (r *Restorer) Alloc(a *droverv1.Allocation) error {
	r.refs.internKnown(a)
	return r.tx.putAlloc(nil, a, true)
}

// Eval restores an evaluation.
func (r *Restorer) Eval(e *droverv1.Evaluation) error { return r.tx.insert(TableEvals, e) }

// Deployment restores a deployment.
func (r *Restorer) Deployment(d *droverv1.Deployment) error {
	return r.tx.insert(TableDeployments, d)
}

// Server restores a server's record.
func (r *Restorer) Server(m *droverv1.ServerMember) error { return r.tx.insert(TableServers, m) }

// JobRequestResult restores the stored result of a job write that carried
// a request id.
func (r *Restorer) JobRequestResult(res *droverv1.JobRequestResult) error {
	return r.tx.insert(TableJobRequests, res)
}

// IPBlockReleases restores when the free addresses of one block were last
// released. Addresses the restored allocations hold stay held, whichever
// comes first.
func (r *Restorer) IPBlockReleases(rec *droverv1.IPBlockReleases) error {
	return r.tx.restoreIPReleases(rec)
}

// TableIndex restores the index of the last write to a table.
func (r *Restorer) TableIndex(table string, index uint64) error {
	if err := r.tx.db.Insert(TableIndex, &tableIndex{table: table, index: index}); err != nil {
		return fmt.Errorf("restore index of %s: %w", table, err)
	}
	return nil
}

// Commit rebuilds the derived allocation sets, swaps the restored state in
// and wakes every blocking query so it re-reads. applied is the raft index
// the snapshot was taken at. The derived sets take that index as the time of
// their last change: an upper bound, so a blocking query may wake once more
// than needed, never less.
func (r *Restorer) Commit(applied uint64) {
	r.tx.index = applied
	r.tx.tables = map[string]struct{}{}
	r.tx.jobSets.flush(r.tx)
	r.tx.nodeSets.flush(r.tx)
	r.tx.flushIPs()
	if err := r.tx.flushAllocs(); err != nil {
		panic("state: restore allocations: " + err.Error())
	}
	if err := r.tx.flushNodeSetRows(); err != nil {
		panic("state: restore node allocation sets: " + err.Error())
	}
	r.tx.db.Commit()
	r.s.replace(r.db, applied, r.nodes)
}

// Abort drops the partly restored state; the store keeps its old state.
func (r *Restorer) Abort() {
	r.tx.db.Abort()
}
