package state

import (
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// UpdateAllocTransitions applies an AllocDesiredTransitionEntry: the flags
// it sets are added to each allocation's desired transition, and its
// evaluations are written. An allocation that is gone, or that the servers
// have already stopped, is skipped: the decision to move it came too late
// to matter. Like an agent's report, the change does not wake the node's
// GetAllocs watchers; the stop the scheduler writes next does.
func (s *StateStore) UpdateAllocTransitions(index uint64, e *droverv1.AllocDesiredTransitionEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		ids := make([]string, 0, len(e.GetTransitions()))
		for id := range e.GetTransitions() {
			ids = append(ids, id)
		}
		slices.Sort(ids) // map order must not leak into the state
		for _, id := range ids {
			old := tx.alloc(id)
			if old == nil || old.ServerTerminal() {
				continue
			}
			a := old.CloneVT()
			a.DesiredTransition = mergeTransition(a.GetDesiredTransition(), e.GetTransitions()[id])
			a.ModifyIndex = tx.index
			a.ModifyTime = e.GetUpdatedAt()
			if err := tx.putAlloc(old, a, false); err != nil {
				return err
			}
		}
		return tx.upsertEvals(e.GetEvals())
	})
}

// mergeTransition returns the flags set in either transition.
func mergeTransition(have, add *droverv1.DesiredTransition) *droverv1.DesiredTransition {
	return &droverv1.DesiredTransition{
		Migrate:         have.GetMigrate() || add.GetMigrate(),
		Reschedule:      have.GetReschedule() || add.GetReschedule(),
		ForceReschedule: have.GetForceReschedule() || add.GetForceReschedule(),
	}
}
