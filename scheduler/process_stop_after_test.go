package scheduler

// stop_after_client_disconnect: an allocation lost with its node may still
// run there until its agent stops it on its own, so it is stopped as lost
// at once but replaced only once that time has passed.

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// stopAfterJob is a job of one allocation whose group sets
// stop_after_client_disconnect to after (none if zero).
func stopAfterJob(typ droverv1.JobType, after time.Duration) *droverv1.Job {
	j := typedJob(typ, 1)
	j.TaskGroups[0].StopAfterClientDisconnect = durationpb.New(after)
	return j
}

// loseNode runs the job, lets time pass, marks the node of its allocation
// down and processes the node's evaluation. It returns the lost allocation
// as stored after that evaluation, and when the node went down.
func (h *harness) loseNode(j *droverv1.Job) (lost *droverv1.Allocation, downAt int64) {
	h.t.Helper()
	stored := h.runJob(j)
	live := h.live(stored.GetId())
	if len(live) != 1 {
		h.t.Fatalf("%d allocations running, want 1", len(live))
	}
	orig := live[0]
	h.now += int64(10 * time.Minute)
	downAt = h.now
	h.setNodeStatus(orig.GetNodeId(), droverv1.NodeStatus_NODE_STATUS_DOWN)
	h.now += int64(time.Second)
	ev := h.newEval(stored, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	h.planner.reset()
	h.process(ev)
	h.checkComplete(ev.GetId(), false)
	return h.snapshot().AllocByID(orig.GetId()), downAt
}

// checkStoppedLost fails the test unless the allocation is stopped and
// recorded lost.
func checkStoppedLost(t *testing.T, a *droverv1.Allocation) {
	t.Helper()
	if a.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP ||
		a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST {
		t.Fatalf("allocation on the down node: desired %s, client %s; want stopped and lost", a.GetDesiredStatus(), a.GetClientStatus())
	}
}

// checkReplacedOnce fails the test unless the job runs exactly one
// allocation, the replacement of lost on another node under its name.
func (h *harness) checkReplacedOnce(jobID string, lost *droverv1.Allocation) {
	h.t.Helper()
	live := h.live(jobID)
	if len(live) != 1 {
		h.t.Fatalf("%d allocations running (%v), want exactly the replacement", len(live), namesOf(live))
	}
	repl := live[0]
	if repl.GetPreviousAllocation() != lost.GetId() || repl.GetName() != lost.GetName() || repl.GetNodeId() == lost.GetNodeId() {
		h.t.Fatalf("replacement %s %s on %s (previous %q), want %s's name on another node, linked to it",
			repl.GetId(), repl.GetName(), repl.GetNodeId(), repl.GetPreviousAllocation(), lost.GetId())
	}
	if next := h.snapshot().AllocByID(lost.GetId()).GetNextAllocation(); next != repl.GetId() {
		h.t.Fatalf("lost allocation's next = %q, want %s", next, repl.GetId())
	}
}

// TestProcessStopAfterClientDisconnect loses a node under a group with
// stop_after_client_disconnect of an hour: the node's evaluation stops the
// allocation as lost, places nothing, and leaves a follow-up due an hour
// after the node went down, recorded on the allocation. An evaluation
// before then changes nothing; the follow-up, or any evaluation after that
// time, places exactly one replacement.
func TestProcessStopAfterClientDisconnect(t *testing.T) {
	const after = time.Hour
	cases := []struct {
		name string
		typ  droverv1.JobType
		// laterEval runs an unrelated evaluation once the time has passed
		// instead of the follow-up; the follow-up then finds nothing to do.
		laterEval bool
	}{
		{name: "service, follow-up", typ: droverv1.JobType_JOB_TYPE_SERVICE},
		{name: "service, later evaluation", typ: droverv1.JobType_JOB_TYPE_SERVICE, laterEval: true},
		{name: "batch, follow-up", typ: droverv1.JobType_JOB_TYPE_BATCH},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(3, nil)
			lost, downAt := h.loseNode(stopAfterJob(tc.typ, after))
			jobID := lost.GetJobId()
			job := h.snapshot().JobByID(jobID)

			checkStoppedLost(t, lost)
			if n := len(h.live(jobID)); n != 0 {
				t.Fatalf("%d allocations placed while the lost one may still run, want none", n)
			}
			if len(h.planner.created) != 1 {
				t.Fatalf("created evaluations %v, want one follow-up", h.planner.created)
			}
			followup := h.evalOf(h.planner.created[0].GetId())
			if lost.GetFollowupEvalId() != followup.GetId() {
				t.Fatalf("allocation's follow-up = %q, want %s", lost.GetFollowupEvalId(), followup.GetId())
			}
			if followup.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP ||
				followup.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_PENDING ||
				followup.GetWaitUntil() != downAt+int64(after) || followup.GetJobId() != jobID {
				t.Fatalf("follow-up = %v, want a pending alloc-stop evaluation of %s due at %d (node down + %s)",
					followup, jobID, downAt+int64(after), after)
			}

			// Before the time: nothing to do, and no second follow-up.
			h.now = downAt + int64(after/2)
			early := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
			h.planner.reset()
			h.process(early)
			h.checkComplete(early.GetId(), false)
			if len(h.planner.plans) != 0 || len(h.planner.created) != 0 {
				t.Fatalf("evaluation before the time: plans %v, created %v; want nothing", h.planner.plans, h.planner.created)
			}

			h.now = followup.GetWaitUntil()
			first := followup
			if tc.laterEval {
				h.now += int64(time.Minute)
				first = h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
			}
			h.planner.reset()
			h.process(first)
			h.checkComplete(first.GetId(), false)
			h.checkReplacedOnce(jobID, lost)
			if len(h.planner.created) != 0 {
				t.Fatalf("replacing evaluation created %v, want nothing", h.planner.created)
			}

			// Whatever runs next finds the group complete.
			h.markRunning(jobID)
			next := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
			if tc.laterEval {
				next = followup
			}
			h.planner.reset()
			h.process(next)
			h.checkComplete(next.GetId(), false)
			if len(h.planner.plans) != 0 {
				t.Fatalf("evaluation after the replacement submitted %v, want nothing", h.planner.plans)
			}
			h.checkReplacedOnce(jobID, lost)
		})
	}
}

// TestProcessLostWithoutStopAfter is the regression for groups without
// stop_after_client_disconnect: a lost allocation is replaced by the
// node's own evaluation, with no follow-up.
func TestProcessLostWithoutStopAfter(t *testing.T) {
	for _, typ := range []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE, droverv1.JobType_JOB_TYPE_BATCH} {
		t.Run(typ.String(), func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(3, nil)
			lost, _ := h.loseNode(stopAfterJob(typ, 0))
			checkStoppedLost(t, lost)
			if lost.GetFollowupEvalId() != "" || len(h.planner.created) != 0 {
				t.Fatalf("follow-up %q, created %v; want none", lost.GetFollowupEvalId(), h.planner.created)
			}
			h.checkReplacedOnce(lost.GetJobId(), lost)
		})
	}
}

// TestProcessStopAfterFollowupCanceled cancels the follow-up of a lost
// allocation (as the broker may): the next evaluation before the time
// makes another, due at the same time and recorded on the allocation, and
// that one places the replacement.
func TestProcessStopAfterFollowupCanceled(t *testing.T) {
	const after = time.Hour
	h := newHarness(t)
	h.addNodes(3, nil)
	lost, downAt := h.loseNode(stopAfterJob(droverv1.JobType_JOB_TYPE_SERVICE, after))
	job := h.snapshot().JobByID(lost.GetJobId())
	canceled := h.evalOf(lost.GetFollowupEvalId()).CloneVT()
	canceled.Status = droverv1.EvalStatus_EVAL_STATUS_CANCELED
	if _, err := h.store.UpsertEvals(h.next(), &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{canceled}}); err != nil {
		t.Fatal(err)
	}

	h.now = downAt + int64(after/2)
	early := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	h.planner.reset()
	h.process(early)
	h.checkComplete(early.GetId(), false)
	if len(h.planner.created) != 1 {
		t.Fatalf("created %v, want one new follow-up", h.planner.created)
	}
	again := h.evalOf(h.planner.created[0].GetId())
	if again.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP || again.GetWaitUntil() != downAt+int64(after) {
		t.Fatalf("new follow-up = %v, want an alloc-stop evaluation due at %d", again, downAt+int64(after))
	}
	stamped := h.snapshot().AllocByID(lost.GetId())
	if stamped.GetFollowupEvalId() != again.GetId() {
		t.Fatalf("allocation's follow-up = %q, want the new one %s", stamped.GetFollowupEvalId(), again.GetId())
	}
	checkStoppedLost(t, stamped)
	if n := len(h.live(job.GetId())); n != 0 {
		t.Fatalf("%d allocations placed before the time, want none", n)
	}

	h.now = again.GetWaitUntil()
	h.planner.reset()
	h.process(again)
	h.checkComplete(again.GetId(), false)
	h.checkReplacedOnce(job.GetId(), lost)
}

// TestProcessStopAfterScaleDown loses one of two allocations under a group
// with stop_after_client_disconnect, then scales the group down to one
// before the lost allocation may be replaced: the lost allocation, still
// counted while its agent may run it, is the one given up, so the other
// keeps running, and the lost one's follow-up then places nothing.
func TestProcessStopAfterScaleDown(t *testing.T) {
	const after = time.Hour
	h := newHarness(t)
	// Room for one allocation per node, so that losing a node loses one.
	h.addNodes(3, func(_ int, n *droverv1.Node) { n.Resources.CpuMhz = 1500 })
	j := stopAfterJob(droverv1.JobType_JOB_TYPE_SERVICE, after)
	j.TaskGroups[0].Count = 2
	job := h.runJob(j)
	live := h.live(job.GetId())
	if len(live) != 2 || live[0].GetNodeId() == live[1].GetNodeId() {
		t.Fatalf("placed %v, want two allocations on two nodes", live)
	}
	lost, kept := live[0], live[1]

	h.now += int64(10 * time.Minute)
	h.setNodeStatus(lost.GetNodeId(), droverv1.NodeStatus_NODE_STATUS_DOWN)
	h.now += int64(time.Second)
	down := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	h.planner.reset()
	h.process(down)
	h.checkComplete(down.GetId(), false)
	checkStoppedLost(t, h.snapshot().AllocByID(lost.GetId()))
	if len(h.planner.created) != 1 {
		t.Fatalf("created %v, want one follow-up", h.planner.created)
	}
	followup := h.evalOf(h.planner.created[0].GetId())

	h.now += int64(time.Minute)
	smaller := job.CloneVT()
	smaller.TaskGroups[0].Count = 1
	_, scale := h.register(smaller)
	h.planner.reset()
	h.process(scale)
	h.checkComplete(scale.GetId(), false)
	checkOnly := func(when string) {
		t.Helper()
		live := h.live(job.GetId())
		if len(live) != 1 || live[0].GetId() != kept.GetId() {
			t.Fatalf("%s: running %v, want only %s", when, idsOf(live), kept.GetId())
		}
	}
	checkOnly("after the scale-down")

	h.now = followup.GetWaitUntil()
	h.planner.reset()
	h.process(followup)
	h.checkComplete(followup.GetId(), false)
	checkOnly("after the lost allocation's follow-up")
	for _, p := range h.planner.plans {
		for _, np := range p.GetNodePlans() {
			if len(np.GetAllocations()) > 0 {
				t.Fatalf("follow-up placed or updated %v on %s, want nothing", np.GetAllocations(), np.GetNodeId())
			}
		}
	}
}

// TestProcessStopAfterFollowupCanceledNodeNotReady cancels the follow-up of
// a lost allocation whose node then comes back, but not ready yet: the plan
// applier takes no updates for such a node, so the next evaluation makes a
// new follow-up without recording it on the allocation, and that follow-up
// places the replacement.
func TestProcessStopAfterFollowupCanceledNodeNotReady(t *testing.T) {
	const after = time.Hour
	for _, status := range []droverv1.NodeStatus{
		droverv1.NodeStatus_NODE_STATUS_INITIALIZING, droverv1.NodeStatus_NODE_STATUS_DISCONNECTED,
	} {
		t.Run(status.String(), func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(3, nil)
			lost, downAt := h.loseNode(stopAfterJob(droverv1.JobType_JOB_TYPE_SERVICE, after))
			job := h.snapshot().JobByID(lost.GetJobId())
			canceled := h.evalOf(lost.GetFollowupEvalId()).CloneVT()
			canceled.Status = droverv1.EvalStatus_EVAL_STATUS_CANCELED
			if _, err := h.store.UpsertEvals(h.next(), &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{canceled}}); err != nil {
				t.Fatal(err)
			}
			h.now = downAt + int64(after/2)
			h.setNodeStatus(lost.GetNodeId(), status)
			// The plan applier refuses the node's part of a plan that
			// updates allocations on it.
			refused := 0
			h.planner.reject = func(_, _ int, np *droverv1.NodePlan) bool {
				if np.GetNodeId() == lost.GetNodeId() && len(np.GetAllocations()) > 0 {
					refused++
					return true
				}
				return false
			}

			early := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
			h.planner.reset()
			h.process(early)
			if refused > 0 {
				t.Fatalf("%d plans updated allocations on the %s node, which the plan applier refuses", refused, status)
			}
			h.checkComplete(early.GetId(), false)
			if len(h.planner.created) != 1 {
				t.Fatalf("created %v, want one new follow-up", h.planner.created)
			}
			again := h.evalOf(h.planner.created[0].GetId())
			// The node no longer says when it went down: the wait counts
			// from when the allocation was recorded lost, by the node's
			// evaluation a second later.
			due := downAt + int64(time.Second) + int64(after)
			if again.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP || again.GetWaitUntil() != due {
				t.Fatalf("new follow-up = %v, want an alloc-stop evaluation due at %d", again, due)
			}
			if got := h.snapshot().AllocByID(lost.GetId()).GetFollowupEvalId(); got != canceled.GetId() {
				t.Fatalf("allocation's follow-up = %q, want the canceled %s left in place", got, canceled.GetId())
			}
			if n := len(h.live(job.GetId())); n != 0 {
				t.Fatalf("%d allocations placed before the time, want none", n)
			}

			h.now = again.GetWaitUntil()
			h.planner.reset()
			h.process(again)
			h.checkComplete(again.GetId(), false)
			h.checkReplacedOnce(job.GetId(), lost)
		})
	}
}
