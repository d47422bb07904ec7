package scheduler

import (
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestReconcileSystem(t *testing.T) {
	sys := rcJob(jtSystem, 1)
	meta := rcNextVersion(sys, func(j *droverv1.Job) { rcTG(j).Meta = map[string]string{"k": "v"} })
	config := rcNextVersion(sys, func(j *droverv1.Job) { rcTG(j).Tasks[0].Config["command"] = "/bin/other" })
	stopped := rcJob(jtSystem, 1, func(j *droverv1.Job) { j.Stop = true })
	withMCD := rcJob(jtSystem, 1, withDisconnect(10*time.Minute, droverv1.ReconnectStrategy_RECONNECT_STRATEGY_BEST_SCORE))
	eligible := rcNodes(rcNode("n1", nsReady), rcNode("n2", nsReady))
	tainted := rcNodes(
		rcNode("down", nsDown), rcNode("drain", nsReady, draining()), rcNode("drain-marked", nsReady, draining()),
		rcNode("disc", nsDisconnected), rcNode("init", nsInit), rcNode("other-dc", nsReady),
		rcNode("inel", nsReady, func(n *droverv1.Node) {
			n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
		}),
	)
	tainted["gone"] = nil
	on := func(job *droverv1.Job, node string, opts ...func(*droverv1.Allocation)) *droverv1.Allocation {
		return rcAlloc(job, 0, node, append([]func(*droverv1.Allocation){withID("x-" + node)}, opts...)...)
	}
	both := func(job *droverv1.Job) []*droverv1.Allocation {
		return []*droverv1.Allocation{on(job, "n1"), on(job, "n2")}
	}

	cases := []struct {
		name   string
		job    *droverv1.Job
		older  []*droverv1.Job
		allocs []*droverv1.Allocation
		want   rcSummary
		check  func(t *testing.T, res *reconcileResult)
	}{
		{
			name: "place on every eligible node",
			job:  sys,
			want: rcSummary{place: rcList("j.web[0] @n1", "j.web[0] @n2")},
		},
		{
			name:   "place only where missing",
			job:    sys,
			allocs: []*droverv1.Allocation{on(sys, "n1")},
			want:   rcSummary{place: rcList("j.web[0] @n2")},
		},
		{
			name:   "lost on down and gone nodes",
			job:    sys,
			allocs: append(both(sys), on(sys, "down"), on(sys, "gone")),
			want:   rcSummary{stop: rcList("x-down: "+allocLost+" (lost)", "x-gone: "+allocLost+" (lost)")},
		},
		{
			name:   "stopped where the job may no longer run",
			job:    sys,
			allocs: append(both(sys), on(sys, "other-dc"), on(sys, "unknown-node")),
			want:   rcSummary{stop: rcList("x-other-dc: "+allocNotNeeded, "x-unknown-node: "+allocNotNeeded)},
		},
		{
			name:   "kept on initializing and ineligible nodes",
			job:    sys,
			allocs: append(both(sys), on(sys, "init"), on(sys, "inel")),
			want:   rcSummary{},
		},
		{
			name:   "on a draining node: kept until the drainer marks it to migrate",
			job:    sys,
			allocs: append(both(sys), on(sys, "drain"), on(sys, "drain-marked", withMigrate())),
			want:   rcSummary{stop: rcList("x-drain-marked: " + allocMigrating)},
		},
		{
			name:   "in place update on every node",
			job:    meta,
			older:  []*droverv1.Job{sys},
			allocs: both(sys),
			want:   rcSummary{inplace: rcList("x-n1@2", "x-n2@2")},
		},
		{
			name:   "destructive update replaces on the same node",
			job:    config,
			older:  []*droverv1.Job{sys},
			allocs: both(sys),
			want:   rcSummary{destructive: rcList("x-n1 => j.web[0]<-x-n1 @n1", "x-n2 => j.web[0]<-x-n2 @n2")},
		},
		{
			name:   "job stopped",
			job:    stopped,
			allocs: append(both(sys), on(sys, "gone"), on(sys, "init", withClient(csFailed))),
			want: rcSummary{stop: rcList(
				"x-gone: "+allocJobStopped+" (lost)", "x-n1: "+allocJobStopped, "x-n2: "+allocJobStopped)},
		},
		{
			name:   "job deleted",
			job:    nil,
			allocs: both(sys),
			want:   rcSummary{stop: rcList("x-n1: "+allocJobStopped, "x-n2: "+allocJobStopped)},
		},
		{
			name:   "disconnected with max_client_disconnect: unknown, not replaced elsewhere",
			job:    withMCD,
			allocs: append(both(withMCD), on(withMCD, "disc")),
			want:   rcSummary{attr: rcList("x-disc unknown followup"), evals: 1},
			check: func(t *testing.T, res *reconcileResult) {
				if ev := res.followupEvals[0]; ev.GetWaitUntil() != rcNow+int64(10*time.Minute) ||
					ev.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_MAX_DISCONNECT_TIMEOUT {
					t.Errorf("follow-up %v", ev)
				}
			},
		},
		{
			name:   "disconnected without max_client_disconnect: lost",
			job:    sys,
			allocs: append(both(sys), on(sys, "disc")),
			want:   rcSummary{stop: rcList("x-disc: " + allocLost + " (lost)")},
		},
		{
			name: "two on one node: the current version is kept",
			job:  meta,
			allocs: []*droverv1.Allocation{
				on(sys, "n1"), on(meta, "n1", withID("y-n1")), on(meta, "n2"),
			},
			want: rcSummary{stop: rcList("x-n1: " + allocNotNeeded)},
		},
		{
			name:   "failed allocation replaced on its node",
			job:    sys,
			allocs: []*droverv1.Allocation{on(sys, "n1", withClient(csFailed)), on(sys, "n2")},
			want:   rcSummary{place: rcList("j.web[0]<-x-n1 @n1")},
		},
		{
			name: "running again after a disconnect: reconnect recorded",
			job:  withMCD,
			allocs: []*droverv1.Allocation{
				on(withMCD, "n1", withStates(stateAt(csUnknown, rcNow-int64(time.Minute)))), on(withMCD, "n2"),
			},
			want: rcSummary{attr: rcList("x-n1 reconnected")},
			check: func(t *testing.T, res *reconcileResult) {
				if d := res.desired[rcGroup]; d.reconnect != 1 {
					t.Errorf("desired %+v, want 1 reconnect", *d)
				}
			},
		},
		{
			name: "group removed from the job",
			job:  sys,
			allocs: append(both(sys),
				rcAlloc(sys, 0, "n1", withID("old"), withGroup("old"))),
			want: rcSummary{stop: rcList("old: " + allocNotNeeded)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := reconcileSystem(tc.job, rcVersions(append(tc.older, tc.job)...), tc.allocs,
				eligible, tainted, rcEval, rcNow)
			rcCheckCounts(t, tc.allocs, res)
			rcCompare(t, summarize(res), tc.want)
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}
