package state

import (
	"fmt"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// UpdateNodeEligibility applies a NodeEligibilityEntry: an operator's
// decision whether new work may be placed on a node. A draining node stays
// ineligible until its drain ends.
func (s *StateStore) UpdateNodeEligibility(index uint64, e *droverv1.NodeEligibilityEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		old := tx.node(e.GetNodeId())
		if old == nil {
			return fmt.Errorf("set eligibility of node %s: %w", e.GetNodeId(), ErrNotFound)
		}
		switch e.GetEligibility() {
		case droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE:
		case droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE:
			if old.GetDrainStrategy() != nil {
				return fmt.Errorf("node %s is draining; end the drain to make it eligible: %w", old.GetId(), ErrConflict)
			}
		default:
			return invalidEntry("node %s: eligibility %s", e.GetNodeId(), e.GetEligibility())
		}
		n := nodeRevision(old)
		n.SchedulingEligibility = e.GetEligibility()
		tx.recordNodeEvent(n, e.GetEvent())
		if err := tx.insert(TableNodes, n); err != nil {
			return err
		}
		return tx.upsertNodeEvals(n, e.GetEvals())
	})
}

// UpdateNodeDrain applies a NodeDrainEntry: a drain starts (the node
// becomes ineligible and the entry's evaluations move its allocations) or
// ends (the node stays ineligible unless the entry says otherwise). It
// fails with ErrConflict if the node changed after the proposer read it.
func (s *StateStore) UpdateNodeDrain(index uint64, e *droverv1.NodeDrainEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		old := tx.node(e.GetNodeId())
		if old == nil {
			return fmt.Errorf("update drain of node %s: %w", e.GetNodeId(), ErrNotFound)
		}
		if want := e.GetExpectedModifyIndex(); want != 0 && old.GetModifyIndex() != want {
			return fmt.Errorf("update drain of node %s: modify index is %d, expected %d: %w",
				e.GetNodeId(), old.GetModifyIndex(), want, ErrConflict)
		}
		n := nodeRevision(old)
		n.DrainStrategy = e.GetDrainStrategy()
		switch {
		case n.DrainStrategy != nil:
			n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
		case e.GetMarkEligible():
			n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE
		}
		tx.recordNodeEvent(n, e.GetEvent())
		if err := tx.insert(TableNodes, n); err != nil {
			return err
		}
		return tx.upsertNodeEvals(n, e.GetEvals())
	})
}

// recordNodeEvent stamps a changed copy of a node with the transaction's
// index and appends ev, if any, to its history.
func (tx *txn) recordNodeEvent(n *droverv1.Node, ev *droverv1.NodeEvent) {
	n.ModifyIndex = tx.index
	if ev != nil {
		ev.CreateIndex = tx.index
		n.Events = appendNodeEvent(n.Events, ev)
	}
}

// upsertNodeEvals writes the evaluations a node change calls for, telling
// those about the node which index of it they must see.
func (tx *txn) upsertNodeEvals(n *droverv1.Node, evals []*droverv1.Evaluation) error {
	for _, ev := range evals {
		if ev.GetNodeId() == n.GetId() {
			ev.NodeModifyIndex = tx.index
		}
	}
	return tx.upsertEvals(evals)
}
