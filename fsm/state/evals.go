package state

import (
	"fmt"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// UpsertEvals applies an EvalUpdateEntry: it creates or updates evaluations.
func (s *StateStore) UpsertEvals(index uint64, e *droverv1.EvalUpdateEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error { return tx.upsertEvals(e.GetEvals()) })
}

func (tx *txn) upsertEvals(evals []*droverv1.Evaluation) error {
	for _, ev := range evals {
		if err := tx.upsertEval(ev); err != nil {
			return err
		}
		if err := tx.cancelBlockedAfter(ev); err != nil {
			return err
		}
	}
	return nil
}

// cancelBlockedAfter cancels the job's blocked evaluations once an
// evaluation of the job completed without leaving a blocked one behind: it
// placed everything, so they have nothing left to wait for.
func (tx *txn) cancelBlockedAfter(ev *droverv1.Evaluation) error {
	if ev.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE || ev.GetBlockedEval() != "" {
		return nil
	}
	it, err := tx.db.Get(TableEvals, indexJob, ev.GetJobId())
	if err != nil {
		return fmt.Errorf("evaluations of job %q: %w", ev.GetJobId(), err)
	}
	var stale []*droverv1.Evaluation
	for obj := it.Next(); obj != nil; obj = it.Next() {
		other := obj.(*droverv1.Evaluation)
		if other.GetId() != ev.GetId() && other.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_BLOCKED {
			stale = append(stale, other)
		}
	}
	for _, other := range stale {
		c := other.CloneVT()
		c.Status = droverv1.EvalStatus_EVAL_STATUS_CANCELED
		c.StatusDescription = fmt.Sprintf("evaluation %s successful", ev.GetId())
		c.ModifyTime = ev.GetModifyTime()
		if err := tx.upsertEval(c); err != nil {
			return err
		}
	}
	return nil
}

// upsertEval writes one evaluation. A known evaluation keeps its creation
// index and time.
func (tx *txn) upsertEval(ev *droverv1.Evaluation) error {
	if ev == nil || ev.GetJobId() == "" || ev.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_UNSPECIFIED {
		return invalidEntry("evaluation %q without job or status", ev.GetId())
	}
	if old := tx.eval(ev.GetId()); old != nil {
		ev.CreateIndex = old.GetCreateIndex()
		ev.CreateTime = old.GetCreateTime()
	} else {
		ev.CreateIndex = tx.index
	}
	ev.ModifyIndex = tx.index
	return tx.insert(TableEvals, ev)
}
