package scheduler

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func withStopAfter(d time.Duration) func(*droverv1.Job) {
	return func(j *droverv1.Job) { rcTG(j).StopAfterClientDisconnect = durationpb.New(d) }
}

// statusSince records when the node got its status.
func statusSince(at int64) func(*droverv1.Node) {
	return func(n *droverv1.Node) { n.StatusUpdatedAt = at }
}

// TestReconcileStopAfter covers allocations lost under a group with
// stop_after_client_disconnect while their agents may still run them: they
// count toward the group until replaced, so a scale-down spends its excess
// on them before stopping a running allocation, and a canceled follow-up is
// made again, recorded on the allocation only where the plan applier takes
// that record.
func TestReconcileStopAfter(t *testing.T) {
	const after = time.Hour
	lostAt := rcNow - int64(10*time.Minute)
	two := rcJob(jtService, 2, withStopAfter(after))
	one := rcJob(jtService, 1, withStopAfter(after))
	nodes := rcNodes(
		rcNode("n1", nsReady), rcNode("n2", nsDown, statusSince(lostAt)),
		rcNode("n3", nsInit), rcNode("n4", nsDisconnected),
	)
	nodes["nil"] = nil
	// stoppedLost is allocation idx of two, stopped as lost on node at
	// lostAt, its follow-up "f-old".
	stoppedLost := func(idx int, node string) *droverv1.Allocation {
		return rcAlloc(two, idx, node, withDesired(dsStop), withClient(csLost), withFollowup("f-old"),
			withStates(stateAt(csLost, lostAt)))
	}
	pending := rcEvalStatus(droverv1.EvalStatus_EVAL_STATUS_PENDING)
	canceled := rcEvalStatus(droverv1.EvalStatus_EVAL_STATUS_CANCELED)
	// dueAt checks that the one follow-up is an alloc-stop evaluation due
	// an hour after the allocation was lost.
	dueAt := func(t *testing.T, res *reconcileResult) {
		t.Helper()
		ev := res.followupEvals[0]
		if ev.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP || ev.GetWaitUntil() != lostAt+int64(after) {
			t.Errorf("follow-up %v, want an alloc-stop evaluation due at %d", ev, lostAt+int64(after))
		}
	}

	runRCCases(t, []rcCase{
		{
			name:   "scale down: the excess is the stopped allocation awaiting its agent",
			job:    one,
			allocs: []*droverv1.Allocation{rcAlloc(two, 0, "n1"), stoppedLost(1, "n2")},
			nodes:  nodes,
			mods:   []func(*reconcileInput){pending},
			want:   rcSummary{},
		},
		{
			name:   "scale down: the excess is the allocation stopped now to await its agent",
			job:    one,
			allocs: []*droverv1.Allocation{rcAlloc(two, 0, "n1"), rcAlloc(two, 1, "n2")},
			nodes:  nodes,
			want:   rcSummary{stop: rcList("a1: " + allocLost + " (lost)"), evals: 1},
			check:  dueAt,
		},
		{
			name:   "scale down beyond those awaiting their agent stops running ones",
			job:    one,
			allocs: []*droverv1.Allocation{rcAlloc(two, 0, "n1"), rcAlloc(two, 1, "n1"), stoppedLost(2, "n2")},
			nodes:  nodes,
			mods:   []func(*reconcileInput){pending},
			want:   rcSummary{stop: rcList("a1: " + allocNotNeeded)},
		},
		{
			name:   "canceled follow-up, node down: made again and recorded",
			job:    two,
			allocs: []*droverv1.Allocation{rcAlloc(two, 0, "n1"), stoppedLost(1, "n2")},
			nodes:  nodes,
			mods:   []func(*reconcileInput){canceled},
			want:   rcSummary{attr: rcList("a1 followup"), evals: 1},
			check:  dueAt,
		},
		{
			name:   "canceled follow-up, node ready again: made again and recorded",
			job:    two,
			allocs: []*droverv1.Allocation{rcAlloc(two, 0, "n1"), stoppedLost(1, "n1")},
			nodes:  nodes,
			mods:   []func(*reconcileInput){canceled},
			want:   rcSummary{attr: rcList("a1 followup"), evals: 1},
			check:  dueAt,
		},
		{
			name:   "canceled follow-up, node initializing: made again, not recorded",
			job:    two,
			allocs: []*droverv1.Allocation{rcAlloc(two, 0, "n1"), stoppedLost(1, "n3")},
			nodes:  nodes,
			mods:   []func(*reconcileInput){canceled},
			want:   rcSummary{evals: 1},
			check:  dueAt,
		},
		{
			name:   "canceled follow-up, node disconnected: made again, not recorded",
			job:    two,
			allocs: []*droverv1.Allocation{rcAlloc(two, 0, "n1"), stoppedLost(1, "n4")},
			nodes:  nodes,
			mods:   []func(*reconcileInput){canceled},
			want:   rcSummary{evals: 1},
			check:  dueAt,
		},
		{
			name:   "canceled follow-up, node collected: made again, not recorded",
			job:    two,
			allocs: []*droverv1.Allocation{rcAlloc(two, 0, "n1"), stoppedLost(1, "nil")},
			nodes:  nodes,
			mods:   []func(*reconcileInput){canceled},
			want:   rcSummary{evals: 1},
			check:  dueAt,
		},
	})
}
