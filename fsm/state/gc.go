package state

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// GCResult counts what a GCEntry deleted; the rest was kept because it was
// no longer collectable when the entry was applied.
type GCResult struct {
	Nodes, Allocs, Evals, Jobs, JobVersions, Deployments int
}

// ApplyGC applies a GCEntry. Garbage collection is planned on a snapshot
// that may be a little old, so every object is checked again here and kept
// unless it is still collectable:
//   - an allocation only once client-terminal: its agent no longer holds
//     its resources;
//   - an evaluation only in a terminal status;
//   - a node only while down with every allocation terminal;
//   - a job only while stopped (or a finished batch job) with no live
//     allocation; it goes with every version;
//   - a job version only if it is not the job's current version and no
//     allocation refers to it;
//   - a deployment only in a terminal status; a purged job's go with it.
func (s *StateStore) ApplyGC(index uint64, e *droverv1.GCEntry) (*GCResult, []Change, error) {
	res := &GCResult{}
	changes, err := s.write(index, func(tx *txn) error {
		for _, id := range e.GetAllocIds() {
			if a := tx.alloc(id); a != nil && a.ClientTerminal() {
				tx.deleteAlloc(a)
				res.Allocs++
			}
		}
		for _, id := range e.GetEvalIds() {
			if ev := tx.eval(id); ev.Terminal() {
				if err := tx.delete(TableEvals, ev); err != nil {
					return err
				}
				res.Evals++
			}
		}
		for _, id := range e.GetNodeIds() {
			ok, err := tx.deleteNode(id)
			if err != nil {
				return err
			}
			if ok {
				res.Nodes++
			}
		}
		for _, ref := range e.GetJobVersions() {
			ok, err := tx.deleteJobVersion(ref.GetJobId(), ref.GetVersion())
			if err != nil {
				return err
			}
			if ok {
				res.JobVersions++
			}
		}
		for _, id := range e.GetDeploymentIds() {
			ok, err := tx.deleteDeployment(id)
			if err != nil {
				return err
			}
			if ok {
				res.Deployments++
			}
		}
		for _, id := range e.GetJobIds() {
			ok, err := tx.deleteJob(id)
			if err != nil {
				return err
			}
			if ok {
				res.Jobs++
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return res, changes, nil
}

// deleteNode deletes a down node whose allocations are all terminal.
func (tx *txn) deleteNode(id string) (bool, error) {
	n := tx.node(id)
	if n == nil || n.GetStatus() != droverv1.NodeStatus_NODE_STATUS_DOWN {
		return false, nil
	}
	for _, a := range tx.nodeSets.peek(tx, id) {
		if !a.Terminal() {
			return false, nil
		}
	}
	// Touching the set lets the flush drop its row once it is empty.
	tx.nodeSets.get(tx, id)
	return true, tx.delete(TableNodes, n)
}

// deleteJob purges a job that is over: stopped, or a batch job whose work
// has ended, with no live allocation left.
func (tx *txn) deleteJob(id string) (bool, error) {
	j := tx.job(id)
	if j == nil {
		return false, nil
	}
	if !j.Finished() {
		return false, nil
	}
	for _, a := range tx.jobSets.peek(tx, id) {
		if !a.ClientTerminal() {
			return false, nil
		}
	}
	tx.jobSets.get(tx, id)
	var versions []*jobVersion
	it, err := tx.db.Get(TableJobVersions, indexID+"_prefix", id)
	mustRead(err, TableJobVersions, indexID)
	for obj := it.Next(); obj != nil; obj = it.Next() {
		if v := obj.(*jobVersion); v.job.GetId() == id {
			versions = append(versions, v)
		}
	}
	for _, v := range versions {
		if err := tx.delete(TableJobVersions, v); err != nil {
			return false, err
		}
	}
	if err := tx.deleteJobDeployments(id); err != nil {
		return false, err
	}
	return true, tx.delete(TableJobs, j)
}

// deleteJobVersion deletes an old version of a job that no allocation
// runs.
func (tx *txn) deleteJobVersion(jobID string, version uint64) (bool, error) {
	v := get[*jobVersion](tx, TableJobVersions, jobID, version)
	if v == nil {
		return false, nil
	}
	if j := tx.job(jobID); j != nil && j.GetVersion() == version {
		return false, nil
	}
	for _, a := range tx.jobSets.peek(tx, jobID) {
		if a.GetJobVersion() == version {
			return false, nil
		}
	}
	return true, tx.delete(TableJobVersions, v)
}
