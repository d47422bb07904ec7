package scheduler

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// rcCase is one table row of the generic reconciler tests.
type rcCase struct {
	name   string
	job    *droverv1.Job
	older  []*droverv1.Job
	allocs []*droverv1.Allocation
	nodes  map[string]*droverv1.Node
	mods   []func(*reconcileInput)
	want   rcSummary
	// check makes further assertions on the result.
	check func(t *testing.T, res *reconcileResult)
}

func runRCCases(t *testing.T, cases []rcCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := rcRun(t, tc.job, tc.older, tc.allocs, tc.nodes, tc.mods...)
			rcCompare(t, summarize(res), tc.want)
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

func rcList(s ...string) []string { return s }

func TestReconcileCounts(t *testing.T) {
	svc := rcJob(jtService, 3)
	svc2 := rcJob(jtService, 2)
	svc4 := rcJob(jtService, 4)
	stopped := rcJob(jtService, 3, func(j *droverv1.Job) { j.Stop = true })
	batch := rcJob(jtBatch, 2)
	ready := rcNodes(rcNode("n1", nsReady), rcNode("n2", nsReady))
	// v2 only changed the count: allocations of v1 are updated in place.
	v1 := rcJob(jtService, 4)
	v2 := rcNextVersion(v1, withCount(3))

	runRCCases(t, []rcCase{
		{
			name:  "place on empty",
			job:   svc,
			nodes: ready,
			want:  rcSummary{place: rcList("j.web[0]", "j.web[1]", "j.web[2]")},
		},
		{
			name:   "nothing to do at count",
			job:    svc2,
			allocs: []*droverv1.Allocation{rcAlloc(svc2, 0, "n1"), rcAlloc(svc2, 1, "n2")},
			nodes:  ready,
			want:   rcSummary{},
			check: func(t *testing.T, res *reconcileResult) {
				if d := res.desired[rcGroup]; d.ignore != 2 {
					t.Errorf("desired %+v, want 2 ignored", *d)
				}
			},
		},
		{
			name:   "scale up fills the lowest free names",
			job:    svc4,
			allocs: []*droverv1.Allocation{rcAlloc(svc4, 0, "n1"), rcAlloc(svc4, 2, "n2")},
			nodes:  ready,
			want:   rcSummary{place: rcList("j.web[1]", "j.web[3]")},
		},
		{
			name: "scale down stops the highest indexes",
			job:  svc2,
			allocs: []*droverv1.Allocation{
				rcAlloc(svc2, 0, "n1"), rcAlloc(svc2, 1, "n2"), rcAlloc(svc2, 2, "n1"), rcAlloc(svc2, 3, "n2"),
			},
			nodes: ready,
			want:  rcSummary{stop: rcList("a2: "+allocNotNeeded, "a3: "+allocNotNeeded)},
		},
		{
			name: "scale down prefers allocations not running",
			job:  svc,
			allocs: []*droverv1.Allocation{
				rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n2", withClient(csPending)), rcAlloc(svc, 2, "n1"), rcAlloc(svc, 3, "n2"),
			},
			nodes: ready,
			want:  rcSummary{stop: rcList("a1: " + allocNotNeeded)},
		},
		{
			name:  "scale down prefers older versions",
			job:   v2,
			older: []*droverv1.Job{v1},
			allocs: []*droverv1.Allocation{
				rcAlloc(v1, 0, "n1"), rcAlloc(v2, 1, "n2"), rcAlloc(v2, 2, "n1"), rcAlloc(v2, 3, "n2"),
			},
			nodes: ready,
			want:  rcSummary{stop: rcList("a0: " + allocNotNeeded)},
		},
		{
			name:   "scale to zero",
			job:    rcJob(jtService, 0),
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n2")},
			nodes:  ready,
			want:   rcSummary{stop: rcList("a0: "+allocNotNeeded, "a1: "+allocNotNeeded)},
		},
		{
			name: "job stopped stops everything not yet stopped",
			job:  stopped,
			allocs: []*droverv1.Allocation{
				rcAlloc(svc, 0, "n1"),
				rcAlloc(svc, 1, "gone"),
				rcAlloc(svc, 2, "n1", withClient(csComplete)),
				rcAlloc(svc, 3, "n2", withDesired(dsStop), withClient(csComplete)),
			},
			nodes: ready,
			want:  rcSummary{stop: rcList("a0: "+allocJobStopped, "a1: "+allocJobStopped+" (lost)")},
		},
		{
			name:   "job deleted stops everything",
			job:    nil,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n2", withClient(csFailed))},
			nodes:  ready,
			want:   rcSummary{stop: rcList("a0: " + allocJobStopped)},
		},
		{
			name:   "group removed from the job",
			job:    rcJob(jtService, 1),
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1", withID("old"), withGroup("old"))},
			nodes:  ready,
			want: rcSummary{
				place: rcList("j.web[0]"),
				stop:  rcList("old: " + allocNotNeeded),
			},
		},
		{
			name: "stopped allocation on a gone node is marked lost",
			job:  rcJob(jtService, 1),
			allocs: []*droverv1.Allocation{
				rcAlloc(svc, 0, "gone", withDesired(dsStop), func(a *droverv1.Allocation) { a.DesiredDescription = "why" }),
			},
			nodes: ready,
			want: rcSummary{
				place: rcList("j.web[0]"),
				stop:  rcList("a0: why (lost)"),
			},
		},
		{
			name:   "batch: complete allocations are done",
			job:    batch,
			allocs: []*droverv1.Allocation{rcAlloc(batch, 0, "n1", withClient(csComplete)), rcAlloc(batch, 1, "n2")},
			nodes:  ready,
			want:   rcSummary{},
		},
		{
			name: "batch: complete and stopped allocations are done",
			job:  batch,
			allocs: []*droverv1.Allocation{
				rcAlloc(batch, 0, "n1", withClient(csComplete), withDesired(dsStop)),
				rcAlloc(batch, 1, "n2", withClient(csComplete)),
			},
			nodes: ready,
			want:  rcSummary{},
		},
		{
			name:   "service: complete allocations are replaced",
			job:    svc2,
			allocs: []*droverv1.Allocation{rcAlloc(svc2, 0, "n1", withClient(csComplete)), rcAlloc(svc2, 1, "n2")},
			nodes:  ready,
			want:   rcSummary{place: rcList("j.web[0]")},
		},
	})
}

func TestReconcileUpdates(t *testing.T) {
	v1 := rcJob(jtService, 2)
	ready := rcNodes(rcNode("n1", nsReady), rcNode("n2", nsReady), rcNode("n5", nsInit))
	twoOld := []*droverv1.Allocation{rcAlloc(v1, 0, "n1"), rcAlloc(v1, 1, "n2")}
	destructive := rcList("a0 => j.web[0]<-a0", "a1 => j.web[1]<-a1")
	taskChanged := rcNextVersion(v1, func(j *droverv1.Job) { rcTG(j).Tasks[0].Config["command"] = "/bin/other" })

	runRCCases(t, []rcCase{
		{
			name:   "in place when only the count changed",
			job:    rcNextVersion(v1, withCount(3)),
			older:  []*droverv1.Job{v1},
			allocs: twoOld,
			nodes:  ready,
			want:   rcSummary{inplace: rcList("a0@2", "a1@2"), place: rcList("j.web[2]")},
			check: func(t *testing.T, res *reconcileResult) {
				for _, a := range res.inplace {
					if a.GetEvalId() != rcEval || a.GetNodeId() == "" {
						t.Errorf("in-place copy %s: eval %q node %q", a.GetId(), a.GetEvalId(), a.GetNodeId())
					}
				}
				if twoOld[0].GetJobVersion() != 1 {
					t.Error("the input allocation was changed")
				}
			},
		},
		{
			name: "in place when meta and reschedule policy changed",
			job: rcNextVersion(v1, func(j *droverv1.Job) {
				j.Meta = map[string]string{"owner": "x"}
				rcTG(j).Meta = map[string]string{"k": "v"}
				rcTG(j).ReschedulePolicy.Delay = durationpb.New(time.Minute)
			}),
			older:  []*droverv1.Job{v1},
			allocs: twoOld,
			nodes:  ready,
			want:   rcSummary{inplace: rcList("a0@2", "a1@2")},
		},
		{
			name:   "destructive when a task's config changed",
			job:    taskChanged,
			older:  []*droverv1.Job{v1},
			allocs: twoOld,
			nodes:  ready,
			want:   rcSummary{destructive: destructive},
		},
		{
			name:   "destructive when resources changed",
			job:    rcNextVersion(v1, func(j *droverv1.Job) { rcTG(j).Resources.MemoryMb = 256 }),
			older:  []*droverv1.Job{v1},
			allocs: twoOld,
			nodes:  ready,
			want:   rcSummary{destructive: destructive},
		},
		{
			name:   "destructive when the job's datacenters changed",
			job:    rcNextVersion(v1, func(j *droverv1.Job) { j.Datacenters = []string{"dc1", "dc2"} }),
			older:  []*droverv1.Job{v1},
			allocs: twoOld,
			nodes:  ready,
			want:   rcSummary{destructive: destructive},
		},
		{
			name:   "destructive when the old version is no longer stored",
			job:    rcNextVersion(v1, withCount(2)),
			allocs: twoOld,
			nodes:  ready,
			want:   rcSummary{destructive: destructive},
		},
		{
			name:   "in place waits while the node is initializing",
			job:    rcNextVersion(v1),
			older:  []*droverv1.Job{v1},
			allocs: []*droverv1.Allocation{rcAlloc(v1, 0, "n1"), rcAlloc(v1, 1, "n5")},
			nodes:  ready,
			want:   rcSummary{inplace: rcList("a0@2")},
		},
		{
			name:  "failed allocation of a replaced spec is replaced at once",
			job:   taskChanged,
			older: []*droverv1.Job{v1},
			allocs: []*droverv1.Allocation{
				rcAlloc(taskChanged, 0, "n1"),
				rcAlloc(v1, 1, "n2", withClient(csFailed), withModified(rcNow)),
			},
			nodes: ready,
			want:  rcSummary{destructive: rcList("a1 => j.web[1]<-a1")},
		},
		{
			name:   "current version is left alone",
			job:    v1,
			allocs: twoOld,
			nodes:  ready,
			want:   rcSummary{},
		},
	})
}

func TestReconcileTainted(t *testing.T) {
	svc := rcJob(jtService, 2)
	dis := rcJob(jtService, 2, withDisconnect(10*time.Minute, droverv1.ReconnectStrategy_RECONNECT_STRATEGY_BEST_SCORE))
	nodes := rcNodes(
		rcNode("n1", nsReady), rcNode("n2", nsDown), rcNode("n3", nsReady, draining()),
		rcNode("n4", nsDisconnected), rcNode("n5", nsInit),
	)
	nodes["nil"] = nil
	lost := rcSummary{stop: rcList("a1: " + allocLost + " (lost)"), place: rcList("j.web[1]<-a1 lost")}
	unknownSince := func(d time.Duration) func(*droverv1.Allocation) {
		return func(a *droverv1.Allocation) {
			a.ClientStatus = csUnknown
			a.AllocStates = append(a.AllocStates, stateAt(csUnknown, rcNow-int64(d)))
		}
	}
	// replacement of a1 on n1.
	b1 := func(job *droverv1.Job) *droverv1.Allocation {
		return rcAlloc(job, 1, "n1", withID("b1"), withPrev("a1"))
	}

	runRCCases(t, []rcCase{
		{
			name:   "lost on a down node, replaced under the same name",
			job:    svc,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n2")},
			nodes:  nodes,
			want:   lost,
		},
		{
			name:   "lost on a node that is gone",
			job:    svc,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "missing")},
			nodes:  nodes,
			want:   lost,
		},
		{
			name:   "lost on a node with a nil entry",
			job:    svc,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "nil")},
			nodes:  nodes,
			want:   lost,
		},
		{
			name:   "lost above count is not replaced",
			job:    rcJob(jtService, 1),
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n2")},
			nodes:  nodes,
			want:   rcSummary{stop: rcList("a1: " + allocLost + " (lost)")},
		},
		{
			name:   "already lost and not yet replaced",
			job:    svc,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n2", withClient(csLost))},
			nodes:  nodes,
			want:   rcSummary{stop: rcList("a1: " + allocLost), place: rcList("j.web[1]<-a1 lost")},
		},
		{
			name: "already lost and replaced is left alone",
			job:  svc,
			allocs: []*droverv1.Allocation{
				rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n2", withClient(csLost), withNext("b1")), b1(svc),
			},
			nodes: nodes,
			want:  rcSummary{},
		},
		{
			name:   "on a draining node: kept until the drainer marks it",
			job:    svc,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n3")},
			nodes:  nodes,
			want:   rcSummary{},
		},
		{
			name: "scale down prefers allocations on a draining node",
			job:  rcJob(jtService, 1),
			allocs: []*droverv1.Allocation{
				rcAlloc(svc, 0, "n3"), rcAlloc(svc, 1, "n1"),
			},
			nodes: nodes,
			want:  rcSummary{stop: rcList("a0: " + allocNotNeeded)},
		},
		{
			name:   "migrate off a draining node once marked",
			job:    svc,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n3", withMigrate())},
			nodes:  nodes,
			want:   rcSummary{stop: rcList("a1: " + allocMigrating), place: rcList("j.web[1]<-a1")},
		},
		{
			name:   "migrate when asked to",
			job:    svc,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n1", withMigrate())},
			nodes:  nodes,
			want:   rcSummary{stop: rcList("a1: " + allocMigrating), place: rcList("j.web[1]<-a1")},
		},
		{
			name:   "disconnected node without max_client_disconnect: lost",
			job:    svc,
			allocs: []*droverv1.Allocation{rcAlloc(svc, 0, "n1"), rcAlloc(svc, 1, "n4")},
			nodes:  nodes,
			want:   lost,
		},
		{
			name:   "disconnected node, pending allocation: lost",
			job:    dis,
			allocs: []*droverv1.Allocation{rcAlloc(dis, 0, "n1"), rcAlloc(dis, 1, "n4", withClient(csPending))},
			nodes:  nodes,
			want:   lost,
		},
		{
			name:   "disconnecting: marked unknown, window scheduled, replaced",
			job:    dis,
			allocs: []*droverv1.Allocation{rcAlloc(dis, 0, "n1"), rcAlloc(dis, 1, "n4")},
			nodes:  nodes,
			want: rcSummary{
				attr:  rcList("a1 unknown followup"),
				place: rcList("j.web[1]<-a1"),
				evals: 1,
			},
			check: func(t *testing.T, res *reconcileResult) {
				ev, a := res.followupEvals[0], res.attributeUpdates[0]
				if ev.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_MAX_DISCONNECT_TIMEOUT ||
					ev.GetWaitUntil() != rcNow+int64(10*time.Minute) || a.GetFollowupEvalId() != ev.GetId() {
					t.Errorf("follow-up %v for allocation with follow-up %q", ev, a.GetFollowupEvalId())
				}
				if a.GetClientStatus() != csUnknown || !needsReconnect(a) || a.UnknownSince() != rcNow {
					t.Errorf("allocation copy not marked unknown at now: %v", a)
				}
			},
		},
		{
			name: "unknown and replaced: left alone",
			job:  dis,
			allocs: []*droverv1.Allocation{
				rcAlloc(dis, 0, "n1"), rcAlloc(dis, 1, "n4", unknownSince(time.Minute), withFollowup("f-old"), withNext("b1")), b1(dis),
			},
			nodes: nodes,
			want:  rcSummary{},
		},
		{
			name: "unknown whose window follow-up is pending: left alone",
			job:  dis,
			allocs: []*droverv1.Allocation{
				rcAlloc(dis, 0, "n1"), rcAlloc(dis, 1, "n4", unknownSince(time.Minute), withFollowup("f-old"), withNext("b1")), b1(dis),
			},
			nodes: nodes,
			mods:  []func(*reconcileInput){rcEvalStatus(droverv1.EvalStatus_EVAL_STATUS_PENDING)},
			want:  rcSummary{},
		},
		{
			name: "unknown whose window follow-up was canceled: scheduled again",
			job:  dis,
			allocs: []*droverv1.Allocation{
				rcAlloc(dis, 0, "n1"), rcAlloc(dis, 1, "n4", unknownSince(time.Minute), withFollowup("f-old"), withNext("b1")), b1(dis),
			},
			nodes: nodes,
			mods:  []func(*reconcileInput){rcEvalStatus(droverv1.EvalStatus_EVAL_STATUS_CANCELED)},
			want:  rcSummary{attr: rcList("a1 followup"), evals: 1},
			check: func(t *testing.T, res *reconcileResult) {
				if id := res.attributeUpdates[0].GetFollowupEvalId(); id != res.followupEvals[0].GetId() {
					t.Errorf("stamped %q, want the new follow-up %q", id, res.followupEvals[0].GetId())
				}
			},
		},
		{
			name: "unknown marked by the heartbeat: window scheduled from its mark, replaced",
			job:  dis,
			allocs: []*droverv1.Allocation{
				rcAlloc(dis, 0, "n1"), rcAlloc(dis, 1, "n4", unknownSince(time.Minute)),
			},
			nodes: nodes,
			want:  rcSummary{attr: rcList("a1 followup"), place: rcList("j.web[1]<-a1"), evals: 1},
			check: func(t *testing.T, res *reconcileResult) {
				if got, want := res.followupEvals[0].GetWaitUntil(), rcNow+int64(9*time.Minute); got != want {
					t.Errorf("wait until %d, want %d", got, want)
				}
			},
		},
		{
			name: "unknown past its window: lost",
			job:  dis,
			allocs: []*droverv1.Allocation{
				rcAlloc(dis, 0, "n1"), rcAlloc(dis, 1, "n4", unknownSince(11*time.Minute), withFollowup("f-old"), withNext("b1")), b1(dis),
			},
			nodes: nodes,
			want:  rcSummary{stop: rcList("a1: " + allocLost + " (lost)")},
		},
		{
			name: "the window's follow-up makes unknown lost",
			job:  dis,
			allocs: []*droverv1.Allocation{
				rcAlloc(dis, 0, "n1"), rcAlloc(dis, 1, "n4", unknownSince(9*time.Minute), withFollowup(rcEval), withNext("b1")), b1(dis),
			},
			nodes: nodes,
			want:  rcSummary{stop: rcList("a1: " + allocLost + " (lost)")},
		},
	})
}
