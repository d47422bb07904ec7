package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

var errRaft = errors.New("raft write failed")

// syncBuffer is a log destination safe for the applier's goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestApplierPartialCommit(t *testing.T) {
	f := newFixture(t)
	j, ev := f.job()
	good, bad := f.node(ready), f.node(ready)
	onGood := f.place(f.alloc(good, j, 100, 100))[0]
	onBad := f.place(f.alloc(bad, j, 3000, 100))[0]
	var logs syncBuffer
	h := newHarness(t, f, &fakeRaft{}, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	before := f.st.LatestIndex()

	placed := f.alloc(good, j, 1000, 100)
	p := newPlan(ev,
		nodePlan(good, []*droverv1.Allocation{placed}, plainStop(onGood.GetId())),
		nodePlan(bad, []*droverv1.Allocation{f.alloc(bad, j, 3000, 100)}, plainStop(onBad.GetId())))
	res := mustResult(t, h.submit(p))

	if res.GetAllocIndex() <= before {
		t.Errorf("alloc index %d, want a new raft index above %d", res.GetAllocIndex(), before)
	}
	if !slices.Equal(res.GetRejectedNodeIds(), []string{bad.GetId()}) {
		t.Errorf("rejected %v, want [%s]", res.GetRejectedNodeIds(), bad.GetId())
	}
	// The worker's retry must see the committed part.
	if res.GetRefreshIndex() != res.GetAllocIndex() {
		t.Errorf("refresh index %d, want the alloc index %d", res.GetRefreshIndex(), res.GetAllocIndex())
	}
	if len(res.GetNodePlans()) != 1 || !res.GetNodePlans()[0].EqualVT(p.GetNodePlans()[0]) {
		t.Errorf("committed node plans %v, want the good node's", res.GetNodePlans())
	}

	snap := f.st.Snapshot()
	if a := snap.AllocByID(placed.GetId()); a == nil || a.GetCreateIndex() != res.GetAllocIndex() || a.GetCreateTime() != now {
		t.Errorf("placed allocation as stored: %v", a)
	}
	if a := snap.AllocByID(onGood.GetId()); !a.ServerTerminal() {
		t.Errorf("stop on the good node not committed: %v", a.GetDesiredStatus())
	}
	if a := snap.AllocByID(onBad.GetId()); a.ServerTerminal() {
		t.Error("stop on the rejected node was committed")
	}
	if allocs, _ := snap.AllocsByNode(bad.GetId()); len(allocs) != 1 {
		t.Errorf("rejected node holds %d allocations, want 1", len(allocs))
	}
	if got := snap.EvalByID(ev.GetId()).GetModifyIndex(); got != res.GetAllocIndex() {
		t.Errorf("eval modify index %d, want %d", got, res.GetAllocIndex())
	}
	if got, want := h.applier.Stats(), (ApplierStats{Applied: 1, PartiallyRejected: 1, NodesRejected: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if out := logs.String(); !strings.Contains(out, bad.GetId()) || !strings.Contains(out, "cpu") || !strings.Contains(out, "level=DEBUG") {
		t.Errorf("rejection not logged at debug with node and reason: %q", out)
	}
}

func TestApplierAnswersWithoutWrite(t *testing.T) {
	tests := []struct {
		name string
		plan func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) *droverv1.Plan
		// rejected says whether the plan's one node is rejected.
		rejected bool
	}{
		{"empty plan", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) *droverv1.Plan {
			return newPlan(ev)
		}, false},
		{"empty node plan", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) *droverv1.Plan {
			return newPlan(ev, nodePlan(f.node(ready), nil))
		}, false},
		{"nothing fits", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) *droverv1.Plan {
			n := f.node(ready)
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, nodeCPU+1, 100)}))
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			j, ev := f.job()
			p := tc.plan(f, j, ev)
			h := newHarness(t, f, &fakeRaft{})
			at := f.st.LatestIndex()
			res := mustResult(t, h.submit(p))
			if n := h.raft.commits.Load(); n != 0 {
				t.Errorf("%d raft writes, want none", n)
			}
			if res.GetAllocIndex() != 0 || len(res.GetNodePlans()) != 0 {
				t.Errorf("result %v, want nothing committed", res)
			}
			switch {
			case tc.rejected && (len(res.GetRejectedNodeIds()) != 1 || res.GetRefreshIndex() != at):
				t.Errorf("result %v, want one rejected node and refresh index %d", res, at)
			case !tc.rejected && (len(res.GetRejectedNodeIds()) != 0 || res.GetRefreshIndex() != 0):
				t.Errorf("result %v, want no rejection and no refresh index", res)
			}
		})
	}
}

func TestApplierCommitError(t *testing.T) {
	f := newFixture(t)
	j, ev := f.job()
	n := f.node(ready)
	h := newHarness(t, f, &fakeRaft{fail: func(*droverv1.PlanResultEntry) error { return errRaft }})
	_, err := result(t, h.submit(newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)}))))
	if !errors.Is(err, errRaft) || !strings.Contains(err.Error(), ev.GetId()) {
		t.Fatalf("error %v, want the raft error naming eval %s", err, ev.GetId())
	}
	if errors.Is(err, ErrDisabled) {
		t.Errorf("error %v claims the queue is disabled", err)
	}
	if got := h.applier.Stats().Applied; got != 0 {
		t.Errorf("applied %d, want 0", got)
	}
}

func TestApplierSnapshotWait(t *testing.T) {
	f := newFixture(t)
	j, ev := f.job()
	n := f.node(ready)
	h := newHarness(t, f, &fakeRaft{}, func(c *Config) { c.SnapshotWait = 20 * time.Millisecond })
	ahead := newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)}))
	ahead.SnapshotIndex = f.st.LatestIndex() + 100
	_, err := result(t, h.submit(ahead))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrDisabled) || !strings.Contains(err.Error(), ev.GetId()) {
		t.Fatalf("plan from the future: %v, want a deadline error naming the eval", err)
	}
	// The applier goes on with the next plan.
	if res := mustResult(t, h.submit(newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})))); res.GetAllocIndex() == 0 {
		t.Fatalf("next plan not committed: %v", res)
	}
}

// TestApplierOverlapRace submits two plans racing for the last capacity of
// a node while the first is held in flight: the second is checked before
// the first commits and must be rejected for that node.
func TestApplierOverlapRace(t *testing.T) {
	f := newFixture(t)
	jobA, evA := f.job()
	jobB, evB := f.job()
	n := f.node(ready)
	raft := &fakeRaft{gate: make(chan struct{}), started: make(chan *droverv1.PlanResultEntry, 4)}
	h := newHarness(t, f, raft)

	futA := h.submit(newPlan(evA, nodePlan(n, []*droverv1.Allocation{f.alloc(n, jobA, 3000, 100)})))
	receive(t, raft.started, "commit of plan A")
	if id := receive(t, h.verified, "check of plan A"); id != evA.GetId() {
		t.Fatalf("checked %s, want plan A", id)
	}
	futB := h.submit(newPlan(evB, nodePlan(n, []*droverv1.Allocation{f.alloc(n, jobB, 3000, 100)})))
	if id := receive(t, h.verified, "check of plan B"); id != evB.GetId() {
		t.Fatalf("checked %s, want plan B", id)
	}
	// B was checked while A is in flight; its refresh index must cover A,
	// so it is answered only once A is done.
	select {
	case <-futB.done:
		t.Fatal("plan B answered while plan A is in flight")
	default:
	}
	raft.gate <- struct{}{}

	resA, resB := mustResult(t, futA), mustResult(t, futB)
	if resA.GetAllocIndex() == 0 || len(resA.GetRejectedNodeIds()) != 0 {
		t.Fatalf("plan A: %v, want committed", resA)
	}
	if !slices.Equal(resB.GetRejectedNodeIds(), []string{n.GetId()}) || resB.GetAllocIndex() != 0 {
		t.Fatalf("plan B: %v, want node %s rejected and nothing committed", resB, n.GetId())
	}
	if resB.GetRefreshIndex() < resA.GetAllocIndex() {
		t.Errorf("plan B refresh index %d, want at least plan A's index %d", resB.GetRefreshIndex(), resA.GetAllocIndex())
	}
	assertNotOvercommitted(t, f, n)
	if got := raft.commits.Load(); got != 1 {
		t.Errorf("%d raft writes, want 1", got)
	}
}

// TestApplierOverlapCountsOnce checks a plan against a snapshot that
// already holds the plan in flight: its allocations are not counted twice.
func TestApplierOverlapCountsOnce(t *testing.T) {
	f := newFixture(t)
	jobA, evA := f.job()
	jobB, evB := f.job()
	n := f.node(ready)
	raft := &fakeRaft{gate: make(chan struct{}), holdAfterApply: true, applied: make(chan uint64, 4)}
	h := newHarness(t, f, raft)

	// Together they fit; counted twice, A's would not leave room for B.
	futA := h.submit(newPlan(evA, nodePlan(n, []*droverv1.Allocation{f.alloc(n, jobA, 1500, 100)})))
	receive(t, raft.applied, "plan A in the store")
	futB := h.submit(newPlan(evB, nodePlan(n, []*droverv1.Allocation{f.alloc(n, jobB, 1500, 100)})))
	receive(t, h.verified, "check of plan A")
	receive(t, h.verified, "check of plan B")
	close(raft.gate)

	resA, resB := mustResult(t, futA), mustResult(t, futB)
	if len(resB.GetRejectedNodeIds()) != 0 || resB.GetAllocIndex() <= resA.GetAllocIndex() {
		t.Fatalf("plan B: %v, want committed after plan A (index %d)", resB, resA.GetAllocIndex())
	}
	assertNotOvercommitted(t, f, n)
}

// TestApplierChecksAgainstEveryWriteInFlight holds two plans' writes in
// flight and checks a third against both: together the three overcommit
// the node, so the third is dropped and told to refresh past both.
func TestApplierChecksAgainstEveryWriteInFlight(t *testing.T) {
	f := newFixture(t)
	n := f.node(ready)
	raft := &fakeRaft{gate: make(chan struct{}, 3), started: make(chan *droverv1.PlanResultEntry, 4)}
	h := newHarness(t, f, raft)

	var futs []*Future
	for i := range 3 {
		j, ev := f.job()
		// 3 × 1,400 MHz overcommit the node's 3,900; any two fit.
		futs = append(futs, h.submit(newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 1400, 100)}))))
		receive(t, h.verified, fmt.Sprintf("check of plan %d", i))
		if i < 2 {
			receive(t, raft.started, fmt.Sprintf("commit of plan %d", i))
		}
	}
	select {
	case <-futs[2].done:
		t.Fatal("the third plan answered while the writes it was checked against are in flight")
	default:
	}
	// A token for each, so that a third write, wrongly let through, ends
	// in the store rather than in a timeout.
	for range 3 {
		raft.gate <- struct{}{}
	}

	first, second, third := mustResult(t, futs[0]), mustResult(t, futs[1]), mustResult(t, futs[2])
	if first.GetAllocIndex() == 0 || second.GetAllocIndex() == 0 {
		t.Fatalf("first two plans: %v and %v, want both committed", first, second)
	}
	if !slices.Equal(third.GetRejectedNodeIds(), []string{n.GetId()}) || third.GetAllocIndex() != 0 {
		t.Fatalf("third plan: %v, want node %s rejected and nothing committed", third, n.GetId())
	}
	if want := max(first.GetAllocIndex(), second.GetAllocIndex()); third.GetRefreshIndex() < want {
		t.Errorf("third plan's refresh index %d, want at least %d", third.GetRefreshIndex(), want)
	}
	assertNotOvercommitted(t, f, n)
}

// TestApplierOverlapFailedCommit: a plan checked against one whose write
// then fails was checked conservatively, never unsafely.
func TestApplierOverlapFailedCommit(t *testing.T) {
	f := newFixture(t)
	jobA, evA := f.job()
	jobB, evB := f.job()
	n := f.node(ready)
	raft := &fakeRaft{gate: make(chan struct{}), started: make(chan *droverv1.PlanResultEntry, 4),
		fail: func(e *droverv1.PlanResultEntry) error {
			if e.GetEvalId() == evA.GetId() {
				return errRaft
			}
			return nil
		}}
	h := newHarness(t, f, raft)

	futA := h.submit(newPlan(evA, nodePlan(n, []*droverv1.Allocation{f.alloc(n, jobA, 3000, 100)})))
	receive(t, raft.started, "commit of plan A")
	at := f.st.LatestIndex()
	futB := h.submit(newPlan(evB, nodePlan(n, []*droverv1.Allocation{f.alloc(n, jobB, 3000, 100)})))
	receive(t, h.verified, "check of plan A")
	receive(t, h.verified, "check of plan B")
	raft.gate <- struct{}{}

	if _, err := result(t, futA); !errors.Is(err, errRaft) {
		t.Fatalf("plan A: %v, want the raft error", err)
	}
	resB := mustResult(t, futB)
	if len(resB.GetRejectedNodeIds()) != 1 || resB.GetRefreshIndex() != at {
		t.Fatalf("plan B: %v, want its node rejected with refresh index %d", resB, at)
	}
	if allocs, _ := f.st.Snapshot().AllocsByNode(n.GetId()); len(allocs) != 0 {
		t.Errorf("node holds %d allocations, want none", len(allocs))
	}
}

// TestApplierStopFailsOutstanding ends the applier while MaxWritesInFlight
// plans are in flight and the next waits to be dispatched: every one of
// them fails, and the last is never written.
func TestApplierStopFailsOutstanding(t *testing.T) {
	f := newFixture(t)
	raft := &fakeRaft{gate: make(chan struct{}), started: make(chan *droverv1.PlanResultEntry, MaxWritesInFlight+1)}
	h := newHarness(t, f, raft)

	var futs []*Future
	for i := range MaxWritesInFlight + 1 {
		j, ev := f.job()
		n := f.node(ready)
		futs = append(futs, h.submit(newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)}))))
		receive(t, h.verified, fmt.Sprintf("check of plan %d", i))
		if i < MaxWritesInFlight {
			receive(t, raft.started, fmt.Sprintf("commit of plan %d", i))
		}
	}
	h.stop()

	for i, fut := range futs {
		if _, err := result(t, fut); !errors.Is(err, ErrDisabled) {
			t.Errorf("plan %d after stop: %v, want ErrDisabled", i, err)
		}
	}
	if got := raft.commits.Load(); got != MaxWritesInFlight {
		t.Errorf("%d raft writes, want %d: the last plan waits for room", got, MaxWritesInFlight)
	}
}

// assertNotOvercommitted checks the node's allocations in the store fit it.
func assertNotOvercommitted(t *testing.T, f *fixture, n *droverv1.Node) {
	t.Helper()
	allocs, _ := f.st.Snapshot().AllocsByNode(n.GetId())
	if ok, reason, _ := fit.AllocsFit(n, allocs); !ok {
		t.Fatalf("node %s overcommitted: %s", n.GetId(), reason)
	}
}

// TestApplierWritesOutcomeWithPlan checks that the outcome a plan carries
// is written in the plan's entry exactly when no node of the plan is
// dropped, and that the result says whether it was.
func TestApplierWritesOutcomeWithPlan(t *testing.T) {
	cases := []struct {
		name    string
		fits    bool // the plan's one node takes what it places
		nodes   bool // the plan has a node plan at all
		written bool
	}{
		{name: "committed in full", fits: true, nodes: true, written: true},
		{name: "its node dropped", nodes: true},
		{name: "nothing but the outcome", written: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			j, ev := f.job()
			h := newHarness(t, f, &fakeRaft{})
			n := f.node(ready)
			p := newPlan(ev)
			if tc.nodes {
				cpu := int64(100)
				if !tc.fits {
					cpu = nodeCPU + 1
				}
				p = newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, cpu, 100)}))
			}
			done := ev.CloneVT()
			done.Status, done.StatusDescription = droverv1.EvalStatus_EVAL_STATUS_COMPLETE, ""
			p.EvalUpdate = done
			res := mustResult(t, h.submit(p))

			stored := f.st.Snapshot().EvalByID(ev.GetId())
			if res.GetEvalUpdated() != tc.written {
				t.Fatalf("result says the outcome was written: %v, want %v", res.GetEvalUpdated(), tc.written)
			}
			if !tc.written {
				if stored.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_COMPLETE {
					t.Fatalf("eval %s completed by a plan whose node was dropped", ev.GetId())
				}
				return
			}
			if stored.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE || res.GetAllocIndex() == 0 ||
				stored.GetModifyIndex() != res.GetAllocIndex() {
				t.Fatalf("stored eval %v, want it complete at the plan's index %d", stored, res.GetAllocIndex())
			}
		})
	}
}
