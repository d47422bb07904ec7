package scheduler

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestReconcileReschedule(t *testing.T) {
	sec := int64(time.Second)
	constant := &droverv1.ReschedulePolicy{
		Attempts: 3, Interval: durationpb.New(time.Hour), Delay: durationpb.New(time.Duration(30 * sec)),
		DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_CONSTANT,
	}
	exponential := &droverv1.ReschedulePolicy{
		Unlimited: true, Delay: durationpb.New(time.Duration(10 * sec)), MaxDelay: durationpb.New(time.Duration(60 * sec)),
		DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_EXPONENTIAL,
	}
	once := &droverv1.ReschedulePolicy{
		Attempts: 1, Interval: durationpb.New(time.Hour), Delay: durationpb.New(time.Duration(5 * sec)),
		DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_CONSTANT,
	}
	unlimited := &droverv1.ReschedulePolicy{
		Unlimited: true, Delay: durationpb.New(time.Duration(5 * sec)), DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_CONSTANT,
	}
	job := rcJob(jtService, 2, withPolicy(constant))
	nodes := rcNodes(rcNode("n1", nsReady), rcNode("n2", nsReady), rcNode("n5", nsInit))
	// failedAt builds job's a1 on n2, failed at rcNow+at.
	failedAt := func(job *droverv1.Job, at time.Duration, opts ...func(*droverv1.Allocation)) *droverv1.Allocation {
		opts = append([]func(*droverv1.Allocation){withClient(csFailed), withModified(rcNow + int64(at))}, opts...)
		return rcAlloc(job, 1, "n2", opts...)
	}
	two := func(job *droverv1.Job, failed *droverv1.Allocation) []*droverv1.Allocation {
		return []*droverv1.Allocation{rcAlloc(job, 0, "n1"), failed}
	}
	now := rcSummary{place: rcList("j.web[1]<-a1 resched")}
	later := rcSummary{attr: rcList("a1 followup"), evals: 1}
	withDelay := func(want time.Duration) func(t *testing.T, res *reconcileResult) {
		return func(t *testing.T, res *reconcileResult) {
			if got := res.place[0].delay; got != int64(want) {
				t.Errorf("placement delay %v, want %v", time.Duration(got), want)
			}
		}
	}
	waitUntil := func(want ...time.Duration) func(t *testing.T, res *reconcileResult) {
		return func(t *testing.T, res *reconcileResult) {
			for i, ev := range res.followupEvals {
				if i >= len(want) || ev.GetWaitUntil() != rcNow+int64(want[i]) {
					t.Errorf("follow-up %d waits until now%+v, want %v", i, time.Duration(ev.GetWaitUntil()-rcNow), want)
				}
			}
		}
	}
	expo := rcJob(jtService, 2, withPolicy(exponential))
	recent := []int64{rcNow - int64(10*time.Minute), rcNow - int64(5*time.Minute)}
	tenRecent := make([]int64, 10)
	for i := range tenRecent {
		tenRecent[i] = rcNow - int64(time.Duration(10-i)*time.Minute)
	}

	runRCCases(t, []rcCase{
		{
			name:   "due now: rescheduled, failed allocation left as it is",
			job:    job,
			allocs: two(job, failedAt(job, -time.Minute)),
			nodes:  nodes,
			want:   now,
			check:  withDelay(30 * time.Second),
		},
		{
			name:   "due within the window: rescheduled now",
			job:    job,
			allocs: two(job, failedAt(job, -29500*time.Millisecond)),
			nodes:  nodes,
			want:   now,
		},
		{
			name:   "due later: follow-up evaluation stamped, nothing placed",
			job:    job,
			allocs: two(job, failedAt(job, -10*time.Second)),
			nodes:  nodes,
			want:   later,
			check: func(t *testing.T, res *reconcileResult) {
				ev := res.followupEvals[0]
				want := &droverv1.Evaluation{
					Id: ev.GetId(), Priority: job.GetPriority(), Type: jtService, JobId: "j",
					TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_RESCHEDULE,
					Status:      droverv1.EvalStatus_EVAL_STATUS_PENDING, StatusDescription: ev.GetStatusDescription(),
					WaitUntil: rcNow + 20*sec, PreviousEval: rcEval, CreateTime: rcNow, ModifyTime: rcNow,
				}
				if !ev.EqualVT(want) || ev.GetId() == "" {
					t.Errorf("follow-up\n got  %v\n want %v", ev, want)
				}
				if res.attributeUpdates[0].GetFollowupEvalId() != ev.GetId() {
					t.Error("allocation not stamped with the follow-up's id")
				}
			},
		},
		{
			name: "follow-ups batched in 5s windows",
			job:  rcJob(jtService, 4, withPolicy(constant)),
			allocs: []*droverv1.Allocation{
				rcAlloc(job, 0, "n1"),
				rcAlloc(job, 1, "n2", withClient(csFailed), withModified(rcNow-20*sec)),
				rcAlloc(job, 2, "n2", withClient(csFailed), withModified(rcNow-17*sec)),
				rcAlloc(job, 3, "n2", withClient(csFailed), withModified(rcNow-14*sec)),
			},
			nodes: nodes,
			want:  rcSummary{attr: rcList("a1 followup", "a2 followup", "a3 followup"), evals: 2},
			check: func(t *testing.T, res *reconcileResult) {
				waitUntil(10*time.Second, 16*time.Second)(t, res)
				ids := make(map[string]string)
				for _, a := range res.attributeUpdates {
					ids[a.GetId()] = a.GetFollowupEvalId()
				}
				if ids["a1"] != res.followupEvals[0].GetId() || ids["a2"] != ids["a1"] || ids["a3"] != res.followupEvals[1].GetId() {
					t.Errorf("stamps %v, evals %s %s", ids, res.followupEvals[0].GetId(), res.followupEvals[1].GetId())
				}
			},
		},
		{
			name:   "exponential delay doubles per earlier reschedule",
			job:    expo,
			allocs: two(expo, failedAt(expo, -35*time.Second, withReschedules(recent...))),
			nodes:  nodes,
			want:   later,
			check:  waitUntil(5 * time.Second), // 10s * 2^2 = 40s after the failure
		},
		{
			name:   "exponential delay is capped by max_delay",
			job:    expo,
			allocs: two(expo, failedAt(expo, -55*time.Second, withReschedules(tenRecent...))),
			nodes:  nodes,
			want:   later,
			check:  waitUntil(5 * time.Second),
		},
		{
			name:   "exponential delay, due now",
			job:    expo,
			allocs: two(expo, failedAt(expo, -41*time.Second, withReschedules(recent...))),
			nodes:  nodes,
			want:   now,
			check:  withDelay(40 * time.Second),
		},
		{
			name:   "constant delay ignores earlier reschedules",
			job:    job,
			allocs: two(job, failedAt(job, -31*time.Second, withReschedules(recent...))),
			nodes:  nodes,
			want:   now,
			check:  withDelay(30 * time.Second),
		},
		{
			name: "attempts within the interval used up: not replaced, counted as ignored",
			job:  rcJob(jtService, 2, withPolicy(once)),
			allocs: two(job, failedAt(job, -time.Minute,
				withReschedules(rcNow-int64(10*time.Minute)))),
			nodes: nodes,
			want:  rcSummary{},
			check: func(t *testing.T, res *reconcileResult) {
				if d := res.desired[rcGroup]; d.ignore != 2 || d.place != 0 {
					t.Errorf("desired %+v, want 2 ignored and nothing placed", *d)
				}
			},
		},
		{
			name:   "attempts before the interval do not count",
			job:    rcJob(jtService, 2, withPolicy(once)),
			allocs: two(job, failedAt(job, -time.Minute, withReschedules(rcNow-int64(2*time.Hour)))),
			nodes:  nodes,
			want:   now,
		},
		{
			name:   "unlimited attempts",
			job:    rcJob(jtService, 2, withPolicy(unlimited)),
			allocs: two(job, failedAt(job, -time.Minute, withReschedules(tenRecent...))),
			nodes:  nodes,
			want:   now,
		},
		{
			name: "force reschedule ignores attempts and delay",
			job:  rcJob(jtService, 2, withPolicy(once)),
			allocs: two(job, failedAt(job, 0, withReschedules(rcNow-int64(time.Minute)),
				func(a *droverv1.Allocation) {
					a.DesiredTransition = &droverv1.DesiredTransition{ForceReschedule: true}
				})),
			nodes: nodes,
			want:  now,
		},
		{
			name:   "this evaluation is the allocation's follow-up: rescheduled now",
			job:    job,
			allocs: two(job, failedAt(job, 0, withFollowup(rcEval))),
			nodes:  nodes,
			want:   now,
		},
		{
			name:   "pending follow-up is not duplicated",
			job:    job,
			allocs: two(job, failedAt(job, -10*time.Second, withFollowup("f1"))),
			nodes:  nodes,
			mods:   []func(*reconcileInput){rcEvalStatus(droverv1.EvalStatus_EVAL_STATUS_PENDING)},
			want:   rcSummary{},
		},
		{
			name:   "follow-up without a way to look it up is trusted",
			job:    job,
			allocs: two(job, failedAt(job, -10*time.Second, withFollowup("f1"))),
			nodes:  nodes,
			want:   rcSummary{},
		},
		{
			name:   "follow-up that already ran: rescheduled now",
			job:    job,
			allocs: two(job, failedAt(job, -10*time.Second, withFollowup("f1"))),
			nodes:  nodes,
			mods:   []func(*reconcileInput){rcEvalStatus(droverv1.EvalStatus_EVAL_STATUS_COMPLETE)},
			want:   now,
		},
		{
			name: "node not ready: follow-up created but not stamped",
			job:  job,
			allocs: []*droverv1.Allocation{
				rcAlloc(job, 0, "n1"), rcAlloc(job, 1, "n5", withClient(csFailed), withModified(rcNow-10*sec)),
			},
			nodes: nodes,
			want:  rcSummary{evals: 1},
		},
		{
			name:   "failed and already replaced: left alone",
			job:    job,
			allocs: append(two(job, failedAt(job, -time.Minute, withNext("b1"))), rcAlloc(job, 1, "n1", withID("b1"))),
			nodes:  nodes,
			want:   rcSummary{},
		},
		{
			name:   "scale down drops a failed allocation first",
			job:    rcJob(jtService, 1, withPolicy(constant)),
			allocs: two(job, failedAt(job, -10*time.Second)),
			nodes:  nodes,
			want:   rcSummary{stop: rcList("a1: " + allocNotNeeded)},
		},
		{
			name: "batch: failed with attempts used up is done",
			job:  rcJob(jtBatch, 2),
			allocs: two(rcJob(jtBatch, 2), failedAt(rcJob(jtBatch, 2), -time.Minute,
				withReschedules(rcNow-int64(time.Hour)))),
			nodes: nodes,
			want:  rcSummary{},
		},
		{
			name:   "batch: failed with an attempt left is rescheduled",
			job:    rcJob(jtBatch, 2),
			allocs: two(rcJob(jtBatch, 2), failedAt(rcJob(jtBatch, 2), -time.Minute)),
			nodes:  nodes,
			want:   now,
			check:  withDelay(5 * time.Second),
		},
	})
}

func TestReconcileReconnect(t *testing.T) {
	strategy := func(s droverv1.ReconnectStrategy, opts ...func(*droverv1.Job)) *droverv1.Job {
		return rcJob(jtService, 1, append([]func(*droverv1.Job){withDisconnect(10*time.Minute, s)}, opts...)...)
	}
	best := strategy(droverv1.ReconnectStrategy_RECONNECT_STRATEGY_BEST_SCORE)
	nodes := rcNodes(rcNode("n1", nsReady), rcNode("n2", nsReady), rcNode("n5", nsInit))
	// orig is a0 on n1, back from a disconnect two minutes ago; repl is its
	// replacement b0 on n2.
	orig := func(job *droverv1.Job, opts ...func(*droverv1.Allocation)) *droverv1.Allocation {
		base := []func(*droverv1.Allocation){
			withNext("b0"), withScore(0.5), withCreated(rcNow - int64(time.Hour)),
			withStates(stateAt(csUnknown, rcNow-int64(2*time.Minute))),
		}
		return rcAlloc(job, 0, "n1", append(base, opts...)...)
	}
	repl := func(job *droverv1.Job, opts ...func(*droverv1.Allocation)) *droverv1.Allocation {
		base := []func(*droverv1.Allocation){
			withID("b0"), withPrev("a0"), withScore(0.5), withCreated(rcNow - int64(2*time.Minute)),
		}
		return rcAlloc(job, 0, "n2", append(base, opts...)...)
	}
	keepOrig := rcSummary{stop: rcList("b0: " + allocReconnected), attr: rcList("a0 reconnected")}
	keepRepl := rcSummary{stop: rcList("a0: " + allocNotNeeded)}
	reconnects := func(n int) func(t *testing.T, res *reconcileResult) {
		return func(t *testing.T, res *reconcileResult) {
			if d := res.desired[rcGroup]; d.reconnect != n {
				t.Errorf("desired %+v, want %d reconnect", *d, n)
			}
		}
	}
	v1 := strategy(droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_ORIGINAL)
	v2 := rcNextVersion(v1, func(j *droverv1.Job) { rcTG(j).Meta = map[string]string{"k": "v"} })
	v2destructive := rcNextVersion(best, func(j *droverv1.Job) { rcTG(j).Tasks[0].Env = map[string]string{"A": "1"} })

	runRCCases(t, []rcCase{
		{
			name:   "best score: equal scores keep the original",
			job:    best,
			allocs: []*droverv1.Allocation{orig(best), repl(best)},
			nodes:  nodes,
			want:   keepOrig,
			check: func(t *testing.T, res *reconcileResult) {
				reconnects(1)(t, res)
				a := res.attributeUpdates[0]
				if last := a.GetAllocStates()[len(a.GetAllocStates())-1]; !last.EqualVT(stateAt(csRunning, rcNow)) {
					t.Errorf("reconnect recorded as %v", last)
				}
			},
		},
		{
			name:   "best score: a higher scoring replacement wins",
			job:    best,
			allocs: []*droverv1.Allocation{orig(best), repl(best, withScore(0.9))},
			nodes:  nodes,
			want:   keepRepl,
			check:  reconnects(0),
		},
		{
			name:   "best score: a running original beats a pending replacement",
			job:    best,
			allocs: []*droverv1.Allocation{orig(best), repl(best, withScore(0.9), withClient(csPending))},
			nodes:  nodes,
			want:   keepOrig,
		},
		{
			name:   "keep original",
			job:    v1,
			allocs: []*droverv1.Allocation{orig(v1), repl(v1, withScore(0.9))},
			nodes:  nodes,
			want:   keepOrig,
		},
		{
			name:   "keep replacement",
			job:    strategy(droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_REPLACEMENT),
			allocs: []*droverv1.Allocation{orig(best), repl(best)},
			nodes:  nodes,
			want:   keepRepl,
		},
		{
			name:   "longest running keeps the one started first",
			job:    strategy(droverv1.ReconnectStrategy_RECONNECT_STRATEGY_LONGEST_RUNNING),
			allocs: []*droverv1.Allocation{orig(best), repl(best, withScore(0.9))},
			nodes:  nodes,
			want:   keepOrig,
		},
		{
			name:  "a newer job version wins over the strategy",
			job:   v2,
			older: []*droverv1.Job{v1},
			allocs: []*droverv1.Allocation{
				orig(v1), repl(v2),
			},
			nodes: nodes,
			want:  keepRepl,
		},
		{
			name:   "original not reported yet: nothing decided",
			job:    best,
			allocs: []*droverv1.Allocation{orig(best, withClient(csUnknown)), repl(best)},
			nodes:  nodes,
			want:   rcSummary{},
		},
		{
			name: "node still initializing: nothing decided",
			job:  best,
			allocs: []*droverv1.Allocation{
				orig(best, func(a *droverv1.Allocation) { a.NodeId = "n5" }), repl(best),
			},
			nodes: nodes,
			want:  rcSummary{},
		},
		{
			name:   "original without a replacement is reconnected and counted",
			job:    best,
			allocs: []*droverv1.Allocation{orig(best, withNext(""))},
			nodes:  nodes,
			want:   rcSummary{attr: rcList("a0 reconnected")},
			check:  reconnects(1),
		},
		{
			name:   "a failed replacement awaiting reschedule is stopped",
			job:    best,
			allocs: []*droverv1.Allocation{orig(best), repl(best, withClient(csFailed), withModified(rcNow))},
			nodes:  nodes,
			want:   keepOrig,
		},
		{
			name:   "the kept original is then updated to the new version",
			job:    v2destructive,
			older:  []*droverv1.Job{best},
			allocs: []*droverv1.Allocation{orig(best), repl(best)},
			nodes:  nodes,
			want: rcSummary{
				stop:        rcList("b0: " + allocReconnected),
				destructive: rcList("a0 => j.web[0]<-a0"),
			},
		},
	})
}
