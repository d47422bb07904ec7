package scheduler

import (
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestProcessOutcomeInPlan checks that a plan carries the outcome of the
// evaluation it would finish, and that the scheduler writes the outcome
// itself exactly when the planner did not commit it with the plan: a
// leader of an older release, a plan partly rejected, an evaluation that
// leaves a blocked one behind.
func TestProcessOutcomeInPlan(t *testing.T) {
	cases := []struct {
		name       string
		carry      bool
		count      int32
		rejectOnce bool // the first plan's first node plan is dropped
		// carried is, per plan, whether it carries the outcome; written
		// whether the scheduler writes it with UpdateEval.
		carried []bool
		written bool
		blocked bool
	}{
		{name: "the plan commits the outcome", carry: true, count: 4, carried: []bool{true}},
		{name: "a leader that ignores it", count: 4, carried: []bool{true}, written: true},
		{name: "the plan partly rejected, the next commits it", carry: true, count: 4, rejectOnce: true, carried: []bool{true, true}},
		{name: "left unplaced: no outcome in the plan", carry: true, count: 6, carried: []bool{false}, written: true, blocked: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.planner.carryEvals = tc.carry
			h.addNodes(2, nil)
			j := testJob(tc.count)
			j.TaskGroups[0].Resources = &droverv1.Resources{CpuMhz: 100, MemoryMb: 3000}
			if tc.rejectOnce {
				h.planner.reject = func(call, i int, _ *droverv1.NodePlan) bool { return call == 0 && i == 0 }
			}
			job, ev := h.register(j)
			h.process(ev)

			done, _ := h.checkComplete(ev.GetId(), tc.blocked)
			if got := len(h.live(job.GetId())); got != min(int(tc.count), 4) {
				t.Fatalf("placed %d, want %d", got, min(int(tc.count), 4))
			}
			if len(h.planner.plans) != len(tc.carried) {
				t.Fatalf("%d plans, want %d", len(h.planner.plans), len(tc.carried))
			}
			for i, p := range h.planner.plans {
				out := p.GetEvalUpdate()
				if (out != nil) != tc.carried[i] {
					t.Fatalf("plan %d eval_update = %v, want one: %v", i, out, tc.carried[i])
				}
				if out != nil && (out.GetId() != ev.GetId() || out.GetJobId() != job.GetId() ||
					out.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE || out.GetBlockedEval() != "") {
					t.Fatalf("plan %d eval_update = %v, want eval %s of job %s complete", i, out, ev.GetId(), job.GetId())
				}
			}
			if wrote := len(h.planner.updated) > 0; wrote != tc.written {
				t.Fatalf("the scheduler wrote the outcome itself: %v (%v), want %v", wrote, h.planner.updated, tc.written)
			}
			if len(h.planner.updated) > 1 {
				t.Fatalf("outcome written %d times", len(h.planner.updated))
			}
			if last := h.planner.results[len(h.planner.results)-1]; !tc.written && done.GetModifyIndex() != last.GetAllocIndex() {
				t.Fatalf("eval modify index %d, want the last plan's index %d", done.GetModifyIndex(), last.GetAllocIndex())
			}
		})
	}
}
