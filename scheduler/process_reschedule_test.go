package scheduler

// Second tries: failed allocations rescheduled after their policy's delay,
// and plans the leader partly rejected, planned again on fresh state.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestProcessReschedule fails a job's allocation again and again. Each
// failure's evaluation places nothing but a follow-up evaluation due at the
// failure time plus the policy's delay for that attempt (none when the
// delay is zero: the replacement is placed at once); the follow-up places
// the replacement, linked to the failed allocation. Once the policy's
// attempts within its interval are used, a failure is not replaced.
func TestProcessReschedule(t *testing.T) {
	const s = time.Second
	cases := []struct {
		name   string
		typ    droverv1.JobType
		policy *droverv1.ReschedulePolicy // nil: the type's default
		// runFor is how long each allocation runs before it fails.
		runFor time.Duration
		delays []time.Duration
		// exhausted says the failure after the last delay is not replaced.
		exhausted bool
	}{
		{name: "constant", typ: droverv1.JobType_JOB_TYPE_SERVICE, runFor: 10 * s, delays: []time.Duration{30 * s, 30 * s}, exhausted: true,
			policy: &droverv1.ReschedulePolicy{Attempts: 2, Interval: durationpb.New(time.Hour), Delay: durationpb.New(30 * s), DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_CONSTANT}},
		{name: "exponential", typ: droverv1.JobType_JOB_TYPE_SERVICE, runFor: 10 * s, delays: []time.Duration{30 * s, 60 * s, 120 * s}, exhausted: true,
			policy: &droverv1.ReschedulePolicy{Attempts: 3, Interval: durationpb.New(time.Hour), Delay: durationpb.New(30 * s),
				DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_EXPONENTIAL, MaxDelay: durationpb.New(time.Hour)}},
		{name: "exponential up to max delay", typ: droverv1.JobType_JOB_TYPE_SERVICE, runFor: 10 * s, delays: []time.Duration{30 * s, 45 * s, 45 * s}, exhausted: true,
			policy: &droverv1.ReschedulePolicy{Attempts: 3, Interval: durationpb.New(time.Hour), Delay: durationpb.New(30 * s),
				DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_EXPONENTIAL, MaxDelay: durationpb.New(45 * s)}},
		{name: "service default, unlimited", typ: droverv1.JobType_JOB_TYPE_SERVICE, runFor: 10 * s, delays: []time.Duration{30 * s, 60 * s, 120 * s, 240 * s}},
		{name: "attempts renewed after the interval", typ: droverv1.JobType_JOB_TYPE_SERVICE, runFor: 20 * time.Minute, delays: []time.Duration{5 * s, 5 * s, 5 * s},
			policy: &droverv1.ReschedulePolicy{Attempts: 1, Interval: durationpb.New(10 * time.Minute), Delay: durationpb.New(5 * s), DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_CONSTANT}},
		{name: "no delay", typ: droverv1.JobType_JOB_TYPE_SERVICE, runFor: 10 * s, delays: []time.Duration{0, 0}, exhausted: true,
			policy: &droverv1.ReschedulePolicy{Attempts: 2, Interval: durationpb.New(time.Hour), DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_CONSTANT}},
		{name: "batch default", typ: droverv1.JobType_JOB_TYPE_BATCH, runFor: 10 * s, delays: []time.Duration{5 * s}, exhausted: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(2, nil)
			j := typedJob(tc.typ, 1)
			if tc.policy != nil {
				j.TaskGroups[0].ReschedulePolicy = tc.policy
			}
			job := h.runJob(j)
			for attempt, delay := range tc.delays {
				cur := h.live(job.GetId())
				if len(cur) != 1 {
					t.Fatalf("attempt %d: %d allocations running, want 1", attempt, len(cur))
				}
				followup := h.failAndCheck(job, cur[0], tc.runFor, delay)
				if followup != nil {
					h.now = followup.GetWaitUntil()
					h.process(followup)
					h.checkComplete(followup.GetId(), false)
				}
				h.checkReplacement(cur[0], attempt, delay)
				h.markRunning(job.GetId())
			}

			last := h.live(job.GetId())[0]
			h.now += int64(tc.runFor)
			h.reportAt(h.now, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED, last)
			h.now += int64(time.Second)
			ev := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE)
			h.planner.reset()
			h.process(ev)
			h.checkComplete(ev.GetId(), false)
			if n := len(h.live(job.GetId())); n != 0 {
				t.Fatalf("%d allocations placed right after the last failure, want none", n)
			}
			if got := len(h.planner.created); got != map[bool]int{true: 0, false: 1}[tc.exhausted] {
				t.Fatalf("after attempts exhausted = %v: follow-ups %v", tc.exhausted, h.planner.created)
			}
		})
	}
}

// failAndCheck makes the allocation fail after it ran for runFor and
// processes the failure's evaluation a second later. With a delay, nothing
// may be placed yet and a follow-up due at the failure time plus the delay
// must be left and stamped on the allocation; it is returned. Without one
// the replacement must be placed at once, and nil is returned.
func (h *harness) failAndCheck(job *droverv1.Job, a *droverv1.Allocation, runFor, delay time.Duration) *droverv1.Evaluation {
	h.t.Helper()
	h.now += int64(runFor)
	failedAt := h.now
	h.reportAt(failedAt, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED, a)
	h.now += int64(time.Second)
	ev := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE)
	h.planner.reset()
	h.process(ev)
	h.checkComplete(ev.GetId(), false)
	if delay == 0 {
		if len(h.planner.created) != 0 {
			h.t.Fatalf("follow-ups %v for a reschedule without delay", h.planner.created)
		}
		return nil
	}
	if n := len(h.live(job.GetId())); n != 0 {
		h.t.Fatalf("%d allocations placed before the reschedule delay", n)
	}
	if len(h.planner.created) != 1 {
		h.t.Fatalf("created evals %v, want one follow-up", h.planner.created)
	}
	f := h.evalOf(h.planner.created[0].GetId())
	if f.GetWaitUntil() != failedAt+int64(delay) || f.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_PENDING ||
		f.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_RESCHEDULE || f.GetPreviousEval() != ev.GetId() || f.GetJobId() != job.GetId() {
		h.t.Fatalf("follow-up = %v, want a pending reschedule eval following %s, due at %d (failure + %v)", f, ev.GetId(), failedAt+int64(delay), delay)
	}
	if got := h.snapshot().AllocByID(a.GetId()).GetFollowupEvalId(); got != f.GetId() {
		h.t.Fatalf("failed allocation's follow-up = %q, want %s", got, f.GetId())
	}

	// An evaluation for another reason before the delay has passed
	// neither replaces the allocation nor schedules it again.
	other := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	h.planner.reset()
	h.process(other)
	h.checkComplete(other.GetId(), false)
	if len(h.live(job.GetId())) != 0 || len(h.planner.created) != 0 {
		h.t.Fatalf("evaluation before the delay placed %d, created %v; want nothing", len(h.live(job.GetId())), h.planner.created)
	}
	return f
}

// checkReplacement checks the one allocation running after failed was
// rescheduled for the attempt-th time (from 0) with delay: on the other
// node, since the failed allocation's node is penalised.
func (h *harness) checkReplacement(failed *droverv1.Allocation, attempt int, delay time.Duration) {
	h.t.Helper()
	live := h.live(failed.GetJobId())
	if len(live) != 1 {
		h.t.Fatalf("attempt %d: %d allocations after the reschedule, want 1", attempt, len(live))
	}
	repl := live[0]
	events := repl.GetRescheduleTracker().GetEvents()
	if repl.GetPreviousAllocation() != failed.GetId() || repl.GetName() != failed.GetName() || len(events) != attempt+1 {
		h.t.Fatalf("replacement = %v, want one of %s with %d reschedule events", repl, failed.GetId(), attempt+1)
	}
	ev := events[attempt]
	if ev.GetPrevAllocId() != failed.GetId() || ev.GetPrevNodeId() != failed.GetNodeId() || ev.GetDelay().AsDuration() != time.Duration(delay) || ev.GetTime() != h.now {
		h.t.Fatalf("reschedule event = %v, want from %s on %s, delay %v, at %d", ev, failed.GetId(), failed.GetNodeId(), delay, h.now)
	}
	if repl.GetNodeId() == failed.GetNodeId() {
		h.t.Fatalf("replacement on the failed allocation's node %s, want the other, empty one", failed.GetNodeId())
	}
	if next := h.snapshot().AllocByID(failed.GetId()).GetNextAllocation(); next != repl.GetId() {
		h.t.Fatalf("failed allocation's next = %q, want %s", next, repl.GetId())
	}
}

// TestProcessPartialCommit has the planner drop node plans, as the leader
// does when a node's part no longer fits: the scheduler plans again on the
// refreshed state and ends with exactly the job's count, or gives up after
// its attempts without progress and leaves a blocked evaluation.
func TestProcessPartialCommit(t *testing.T) {
	always := func(int, int) bool { return true }
	cases := []struct {
		name string
		typ  droverv1.JobType
		// reject says whether the node plan at position i of the call-th
		// plan is dropped.
		reject func(call, i int) bool
		// fill takes the first rejected node with another job's
		// allocation, as another worker's plan that got there first.
		fill      bool
		wantPlans int
		gaveUp    bool
	}{
		{name: "one node rejected once", typ: droverv1.JobType_JOB_TYPE_SERVICE, wantPlans: 2,
			reject: func(call, i int) bool { return call == 0 && i == 0 }},
		{name: "node taken by another plan", typ: droverv1.JobType_JOB_TYPE_SERVICE, fill: true, wantPlans: 2,
			reject: func(call, i int) bool { return call == 0 && i == 0 }},
		{name: "no progress twice, then committed", typ: droverv1.JobType_JOB_TYPE_SERVICE, wantPlans: 3,
			reject: func(call, _ int) bool { return call < 2 }},
		{name: "progress resets the attempts", typ: droverv1.JobType_JOB_TYPE_SERVICE, wantPlans: maxServiceAttempts + 2,
			reject: func(call, i int) bool {
				return call == 0 || (call == 1 && i == 0) || (call >= 2 && call < maxServiceAttempts+1)
			}},
		{name: "service gives up", typ: droverv1.JobType_JOB_TYPE_SERVICE, reject: always, wantPlans: maxServiceAttempts, gaveUp: true},
		{name: "batch gives up", typ: droverv1.JobType_JOB_TYPE_BATCH, reject: always, wantPlans: maxBatchAttempts, gaveUp: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(4, nil)
			filler, _ := h.register(testJob(1))
			filled := ""
			h.planner.reject = func(call, i int, np *droverv1.NodePlan) bool {
				if !tc.reject(call, i) {
					return false
				}
				if tc.fill && filled == "" {
					filled = np.GetNodeId()
					h.place(runningAlloc(filler, h.snapshot().NodeByID(filled), &droverv1.AllocatedResources{CpuMhz: 4000, MemoryMb: 100}))
				}
				return true
			}
			job, ev := h.register(typedJob(tc.typ, 8))
			h.process(ev)
			if len(h.planner.plans) != tc.wantPlans {
				t.Fatalf("%d plans submitted, want %d", len(h.planner.plans), tc.wantPlans)
			}
			live := h.live(job.GetId())
			if tc.gaveUp {
				checkGaveUp(t, h, ev)
				if len(live) != 0 {
					t.Fatalf("%d allocations placed, want none", len(live))
				}
				return
			}
			h.checkComplete(ev.GetId(), false)
			if got, want := namesOf(live), namesUpTo(job, 8); !slices.Equal(got, want) {
				t.Fatalf("placed %v, want %v", got, want)
			}
			if n := perNode(live)[filled]; filled != "" && n != 0 {
				t.Fatalf("%d allocations on the node another plan filled", n)
			}
		})
	}
}

// checkGaveUp checks that the evaluation failed and left a blocked
// evaluation that any capacity change may wake.
func checkGaveUp(t *testing.T, h *harness, ev *droverv1.Evaluation) {
	t.Helper()
	done := h.evalOf(ev.GetId())
	if done.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_FAILED || !strings.Contains(done.GetStatusDescription(), "gave up") {
		t.Fatalf("eval = %v, want failed after giving up", done)
	}
	blocked := h.evalOf(done.GetBlockedEval())
	if blocked.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_BLOCKED || blocked.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_MAX_PLANS ||
		!blocked.GetEscapedComputedClass() || blocked.GetPreviousEval() != ev.GetId() {
		t.Fatalf("blocked eval = %v, want blocked by max plans, escaped, following %s", blocked, ev.GetId())
	}
}
