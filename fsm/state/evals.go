package state

import (
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
