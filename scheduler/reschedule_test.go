package scheduler

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestRescheduleDelay(t *testing.T) {
	s := int64(time.Second)
	tracker := func(n int) *droverv1.RescheduleTracker {
		tr := &droverv1.RescheduleTracker{}
		for range n {
			tr.Events = append(tr.Events, &droverv1.RescheduleEvent{})
		}
		return tr
	}
	constant := droverv1.DelayFunction_DELAY_FUNCTION_CONSTANT
	exp := droverv1.DelayFunction_DELAY_FUNCTION_EXPONENTIAL
	cases := []struct {
		name   string
		policy *droverv1.ReschedulePolicy
		n      int
		want   int64
	}{
		{"constant, first", &droverv1.ReschedulePolicy{Delay: durationpb.New(time.Duration(5 * s)), DelayFunction: constant}, 0, 5 * s},
		{"constant, later", &droverv1.ReschedulePolicy{Delay: durationpb.New(time.Duration(5 * s)), DelayFunction: constant}, 4, 5 * s},
		{"constant above max", &droverv1.ReschedulePolicy{Delay: durationpb.New(time.Duration(5 * s)), MaxDelay: durationpb.New(time.Duration(2 * s)), DelayFunction: constant}, 0, 2 * s},
		{"unspecified is constant", &droverv1.ReschedulePolicy{Delay: durationpb.New(time.Duration(5 * s))}, 3, 5 * s},
		{"exponential, first", &droverv1.ReschedulePolicy{Delay: durationpb.New(time.Duration(5 * s)), MaxDelay: durationpb.New(time.Duration(3600 * s)), DelayFunction: exp}, 0, 5 * s},
		{"exponential, third", &droverv1.ReschedulePolicy{Delay: durationpb.New(time.Duration(5 * s)), MaxDelay: durationpb.New(time.Duration(3600 * s)), DelayFunction: exp}, 2, 20 * s},
		{"exponential, capped", &droverv1.ReschedulePolicy{Delay: durationpb.New(time.Duration(5 * s)), MaxDelay: durationpb.New(time.Duration(30 * s)), DelayFunction: exp}, 3, 30 * s},
		{"exponential, no max, no overflow", &droverv1.ReschedulePolicy{Delay: durationpb.New(time.Duration(5 * s)), DelayFunction: exp}, 200, 5 * s << 30},
		{"no policy", nil, 2, 0},
	}
	for _, tc := range cases {
		got := rescheduleDelay(tc.policy, tracker(tc.n))
		if tc.name == "exponential, no max, no overflow" {
			if got <= 0 {
				t.Errorf("%s: delay %d overflowed", tc.name, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%s: delay %v, want %v", tc.name, time.Duration(got), time.Duration(tc.want))
		}
	}
}

func TestRescheduleAllowed(t *testing.T) {
	hour := int64(time.Hour)
	at := func(ago ...time.Duration) *droverv1.Allocation {
		times := make([]int64, len(ago))
		for i, d := range ago {
			times[i] = rcNow - int64(d)
		}
		return rcAlloc(rcJob(jtService, 1), 0, "n1", withReschedules(times...))
	}
	cases := []struct {
		name   string
		policy *droverv1.ReschedulePolicy
		alloc  *droverv1.Allocation
		want   bool
	}{
		{"no policy", nil, at(), false},
		{"zero attempts", &droverv1.ReschedulePolicy{Interval: durationpb.New(time.Duration(hour))}, at(), false},
		{"first attempt", &droverv1.ReschedulePolicy{Attempts: 1, Interval: durationpb.New(time.Duration(hour))}, at(), true},
		{"attempts used in interval", &droverv1.ReschedulePolicy{Attempts: 2, Interval: durationpb.New(time.Duration(hour))}, at(time.Minute, 30*time.Minute), false},
		{"one attempt aged out", &droverv1.ReschedulePolicy{Attempts: 2, Interval: durationpb.New(time.Duration(hour))}, at(time.Minute, 2*time.Hour), true},
		{"unlimited", &droverv1.ReschedulePolicy{Unlimited: true}, at(time.Minute, time.Minute, time.Minute), true},
	}
	for _, tc := range cases {
		if got := rescheduleAllowed(tc.alloc, tc.policy, rcNow); got != tc.want {
			t.Errorf("%s: allowed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRescheduleTracker(t *testing.T) {
	job := rcJob(jtService, 1)
	first := rescheduleTracker(rcAlloc(job, 0, "n1"), rcNow, 7)
	want := &droverv1.RescheduleTracker{Events: []*droverv1.RescheduleEvent{
		{Time: rcNow, PrevAllocId: "a0", PrevNodeId: "n1", Delay: durationpb.New(time.Duration(7))},
	}}
	if !first.EqualVT(want) {
		t.Errorf("first tracker %v, want %v", first, want)
	}

	prev := rcAlloc(job, 0, "n2", withID("b0"), func(a *droverv1.Allocation) { a.RescheduleTracker = first })
	second := rescheduleTracker(prev, rcNow+1, 14)
	if n := len(second.GetEvents()); n != 2 || second.GetEvents()[1].GetPrevAllocId() != "b0" {
		t.Errorf("second tracker %v", second)
	}
	second.Events[0].Delay = durationpb.New(time.Duration(99))
	if first.GetEvents()[0].GetDelay().AsDuration() != 7 {
		t.Error("the previous allocation's tracker was changed")
	}

	long := make([]int64, maxRescheduleEvents+10)
	for i := range long {
		long[i] = int64(i)
	}
	bounded := rescheduleTracker(rcAlloc(job, 0, "n1", withReschedules(long...)), rcNow, 1)
	if n := len(bounded.GetEvents()); n != maxRescheduleEvents {
		t.Errorf("tracker holds %d events, want %d", n, maxRescheduleEvents)
	}
	if last := bounded.GetEvents()[maxRescheduleEvents-1]; last.GetTime() != rcNow {
		t.Errorf("newest event %v, want the new reschedule", last)
	}
	if second := bounded.GetEvents()[maxRescheduleEvents-2]; second.GetTime() != int64(len(long)-1) {
		t.Errorf("kept events do not end with the newest old one: %v", second)
	}
}

func TestFollowupBatches(t *testing.T) {
	s := int64(time.Second)
	job := rcJob(jtService, 1)
	resched := droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_RESCHEDULE
	timeout := droverv1.EvalTrigger_EVAL_TRIGGER_MAX_DISCONNECT_TIMEOUT
	f := &followups{}
	allocs := make([]*droverv1.Allocation, 5)
	for i := range allocs {
		allocs[i] = &droverv1.Allocation{}
	}
	// Out of order on purpose; 4.9s after the batch start still joins it,
	// 5s starts a new one; triggers never share an evaluation.
	f.add(resched, rcNow+16*s, allocs[0])
	f.add(resched, rcNow+10*s, allocs[1])
	f.add(resched, rcNow+10*s+4900*int64(time.Millisecond), allocs[2])
	f.add(timeout, rcNow+11*s, allocs[3])
	f.add(resched, rcNow+15*s, nil)
	f.add(resched, rcNow+20*s, allocs[4])
	evals := f.evals(job, rcEval, rcNow)

	type want struct {
		trigger droverv1.EvalTrigger
		at      int64
	}
	wants := []want{{resched, rcNow + 10*s}, {resched, rcNow + 15*s}, {resched, rcNow + 20*s}, {timeout, rcNow + 11*s}}
	if len(evals) != len(wants) {
		t.Fatalf("%d evaluations, want %d: %v", len(evals), len(wants), evals)
	}
	for i, w := range wants {
		if evals[i].GetTriggeredBy() != w.trigger || evals[i].GetWaitUntil() != w.at || evals[i].GetPreviousEval() != rcEval {
			t.Errorf("evaluation %d: %v, want %v at now%+v", i, evals[i], w.trigger, time.Duration(w.at-rcNow))
		}
	}
	stamps := []string{evals[1].GetId(), evals[0].GetId(), evals[0].GetId(), evals[3].GetId(), evals[2].GetId()}
	for i, a := range allocs {
		if a.GetFollowupEvalId() != stamps[i] {
			t.Errorf("allocation %d stamped %q, want %q", i, a.GetFollowupEvalId(), stamps[i])
		}
	}
	if (&followups{}).evals(job, rcEval, rcNow) != nil {
		t.Error("no work made evaluations")
	}
}
