package state

import (
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestUpdateAllocTransitions marks allocations for migration: live ones are
// marked with the entry's index, a stopped one and a missing one are
// skipped, the evaluation is written, and the node's GetAllocs index does
// not move.
func TestUpdateAllocTransitions(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(3)
	placed := f.place(mock.Alloc(n, job, 0), mock.Alloc(n, job, 1), mock.Alloc(n, job, 2))
	stopped := placed[2].GetId()
	if _, err := f.s.UpsertPlanResults(f.next(), &droverv1.PlanResultEntry{Stops: []*droverv1.AllocStop{{
		AllocId: stopped, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP}}}); err != nil {
		t.Fatal(err)
	}
	// One allocation already asks to be rescheduled; migrating keeps that.
	if _, err := f.s.UpdateAllocTransitions(f.next(), &droverv1.AllocDesiredTransitionEntry{
		Transitions: map[string]*droverv1.DesiredTransition{placed[1].GetId(): {Reschedule: true}}}); err != nil {
		t.Fatal(err)
	}
	_, nodeIndexBefore := f.s.Snapshot().AllocsByNode(n.GetId())

	ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_DRAIN)
	migrate := &droverv1.DesiredTransition{Migrate: true}
	index := f.next()
	changes, err := f.s.UpdateAllocTransitions(index, &droverv1.AllocDesiredTransitionEntry{
		Transitions: map[string]*droverv1.DesiredTransition{
			placed[0].GetId(): migrate, placed[1].GetId(): migrate, stopped: migrate, mock.ID(): migrate,
		},
		Evals:     []*droverv1.Evaluation{ev},
		UpdatedAt: 77,
	})
	if err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot()
	for _, tc := range []struct {
		id                  string
		migrate, reschedule bool
		modifyIndex         uint64
	}{
		{placed[0].GetId(), true, false, index},
		{placed[1].GetId(), true, true, index},
		{stopped, false, false, index - 2},
	} {
		a := snap.AllocByID(tc.id)
		dt := a.GetDesiredTransition()
		if dt.GetMigrate() != tc.migrate || dt.GetReschedule() != tc.reschedule || a.GetModifyIndex() != tc.modifyIndex {
			t.Errorf("alloc %s: transition %v at modify index %d; want migrate %t, reschedule %t at %d",
				tc.id, dt, a.GetModifyIndex(), tc.migrate, tc.reschedule, tc.modifyIndex)
		}
	}
	if got := snap.AllocByID(placed[0].GetId()).GetModifyTime(); got != 77 {
		t.Errorf("modify time = %d, want the entry's 77", got)
	}
	if got := snap.EvalByID(ev.GetId()); got.GetCreateIndex() != index {
		t.Errorf("evaluation %v, want it written at %d", got, index)
	}
	if _, after := snap.AllocsByNode(n.GetId()); after != nodeIndexBefore {
		t.Errorf("node allocations index moved from %d to %d: agents' watches would wake for nothing", nodeIndexBefore, after)
	}
	if len(changes) != 3 { // two allocations and the evaluation
		t.Errorf("%d changes, want 3: %v", len(changes), changes)
	}
}
