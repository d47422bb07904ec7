package plan

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 10 * time.Second

// fixture is a state store written like a raft log: each write takes the
// next index. The fake committer writes through it too, so indexes stay in
// order when tests and the applier both write.
type fixture struct {
	t     testing.TB
	st    *state.StateStore
	mu    sync.Mutex
	index uint64
	// seq numbers allocations, for distinct names, addresses and ports.
	seq int
	// flying are allocations a test case puts in the plan in flight.
	flying []*droverv1.Allocation
	// usage is the usage cache a cached verification reads; a case fills
	// it with warm to leave an entry built from an older state.
	usage *scheduler.UsageCache
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, st: st, usage: scheduler.NewUsageCache()}
}

// warm counts the node's allocation row as stored now into the fixture's
// usage cache, as a scheduler pass would.
func (f *fixture) warm(node *droverv1.Node) {
	snap := f.st.Snapshot()
	f.usage.Base(snap.NodeByID(node.GetId()), snap.NodeAllocsShared(node.GetId()))
}

// cacheModes are the two ways the applier counts what a node holds: every
// allocation again, or from the server's usage cache where it may
// (verifier.cachedHeld). Table tests of verification run in both.
var cacheModes = []struct {
	name   string
	cached bool
}{{"uncached", false}, {"cached", true}}

// cache is the usage cache a verification in the mode reads, or nil.
func (f *fixture) cache(cached bool) *scheduler.UsageCache {
	if cached {
		return f.usage
	}
	return nil
}

// write applies one entry at the next index and returns the index.
func (f *fixture) write(apply func(index uint64) error) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index++
	return f.index, apply(f.index)
}

func (f *fixture) mustWrite(what string, apply func(index uint64) error) {
	f.t.Helper()
	if _, err := f.write(apply); err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

// node registers a mock node, changed by edit before registration, and
// brings it to status; it returns the node as stored.
func (f *fixture) node(status droverv1.NodeStatus, edit ...func(*droverv1.Node)) *droverv1.Node {
	f.t.Helper()
	n := mock.Node()
	for _, e := range edit {
		e(n)
	}
	f.mustWrite("register node", func(i uint64) error {
		res, _, err := f.st.UpsertNodes(i, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n.CloneVT()}, RegisteredAt: 1})
		if err != nil {
			return err
		}
		return res.Errors[0]
	})
	if status != droverv1.NodeStatus_NODE_STATUS_INITIALIZING {
		f.setStatus(n.GetId(), status)
	}
	return f.st.Snapshot().NodeByID(n.GetId())
}

// reregister registers the node again, changed by edit, as its agent
// would after a restart, and brings it back to ready.
func (f *fixture) reregister(node *droverv1.Node, edit func(*droverv1.Node)) {
	f.t.Helper()
	n := node.CloneVT()
	edit(n)
	f.mustWrite("register node again", func(i uint64) error {
		res, _, err := f.st.UpsertNodes(i, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n}, RegisteredAt: 1})
		if err != nil {
			return err
		}
		return res.Errors[0]
	})
	if f.st.Snapshot().NodeByID(n.GetId()).GetStatus() != ready {
		f.setStatus(n.GetId(), ready)
	}
}

func (f *fixture) setStatus(nodeID string, status droverv1.NodeStatus) {
	f.t.Helper()
	f.mustWrite("set node status", func(i uint64) error {
		_, err := f.st.UpdateNodeStatus(i, &droverv1.NodeStatusEntry{NodeId: nodeID, Status: status, UpdatedAt: 2})
		return err
	})
}

// job registers a mock job (its group asks for one dynamic port, "http")
// with a pending evaluation and returns both as stored; edits change the
// job before it is registered.
func (f *fixture) job(edits ...func(*droverv1.Job)) (*droverv1.Job, *droverv1.Evaluation) {
	f.t.Helper()
	j := mock.Job(1)
	for _, e := range edits {
		e(j)
	}
	ev := mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	f.mustWrite("register job", func(i uint64) error {
		_, _, err := f.st.UpsertJob(i, &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: ev.CloneVT(), SubmittedAt: 3})
		return err
	})
	snap := f.st.Snapshot()
	return snap.JobByID(j.GetId()), snap.EvalByID(ev.GetId())
}

// alloc returns a new allocation of job on node asking for cpu and memory,
// with an address and a port of its own.
func (f *fixture) alloc(node *droverv1.Node, job *droverv1.Job, cpu, memory int64) *droverv1.Allocation {
	f.mu.Lock()
	f.seq++
	i := f.seq
	f.mu.Unlock()
	a := mock.Alloc(node, job, i)
	a.Resources.CpuMhz = cpu
	a.Resources.MemoryMb = memory
	a.Resources.Ip = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	a.Resources.Ports = []*droverv1.AllocatedPort{{Label: "http", Value: int32(21000 + i)}}
	return a
}

// place writes allocations as a committed plan and returns them as stored.
func (f *fixture) place(allocs ...*droverv1.Allocation) []*droverv1.Allocation {
	f.t.Helper()
	e := &droverv1.PlanResultEntry{AppliedAt: 4}
	for _, a := range allocs {
		e.Allocations = append(e.Allocations, a.CloneVT())
	}
	f.mustWrite("place allocations", func(i uint64) error {
		_, err := f.st.UpsertPlanResults(i, e)
		return err
	})
	snap := f.st.Snapshot()
	out := make([]*droverv1.Allocation, len(allocs))
	for i, a := range allocs {
		out[i] = snap.AllocByID(a.GetId())
	}
	return out
}

// stop marks allocations desired stop, as a committed plan would.
func (f *fixture) stop(ids ...string) {
	f.t.Helper()
	e := &droverv1.PlanResultEntry{AppliedAt: 4}
	for _, id := range ids {
		e.Stops = append(e.Stops, &droverv1.AllocStop{AllocId: id, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP})
	}
	f.mustWrite("stop allocations", func(i uint64) error {
		_, err := f.st.UpsertPlanResults(i, e)
		return err
	})
}

// report records an agent's report of its allocations' client status.
func (f *fixture) report(nodeID string, status droverv1.AllocClientStatus, ids ...string) {
	f.t.Helper()
	group := &droverv1.NodeAllocUpdates{NodeId: nodeID}
	for _, id := range ids {
		group.Allocs = append(group.Allocs, &droverv1.AllocClientUpdate{AllocId: id, ClientStatus: status})
	}
	f.mustWrite("report allocations", func(i uint64) error {
		res, _, err := f.st.UpdateAllocsFromClient(i, &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{group}, UpdatedAt: 5})
		if err == nil && (len(res.RefusedNodes) > 0 || len(res.UnknownAllocs) > 0) {
			err = fmt.Errorf("report refused: %+v", res)
		}
		return err
	})
}

// withStatus returns a copy of a with another client status.
func withStatus(a *droverv1.Allocation, status droverv1.AllocClientStatus) *droverv1.Allocation {
	c := a.CloneVT()
	c.ClientStatus = status
	return c
}

// fakeRaft commits plan results by applying them to the fixture's store at
// the next index. With a gate, each commit takes a token from it before
// applying (or after, with holdAfterApply), so a test can keep a commit in
// flight.
type fakeRaft struct {
	f              *fixture
	gate           chan struct{}
	holdAfterApply bool
	// started receives each entry as its commit begins, if set.
	started chan *droverv1.PlanResultEntry
	// applied receives each entry's index once it is in the store, if set.
	applied chan uint64
	// fail, if set, decides a commit's error before it is applied.
	fail func(*droverv1.PlanResultEntry) error

	commits atomic.Int32
}

func (r *fakeRaft) CommitPlan(ctx context.Context, e *droverv1.PlanResultEntry) (uint64, error) {
	r.commits.Add(1)
	if r.started != nil {
		select {
		case r.started <- e:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if !r.holdAfterApply {
		if err := r.pass(ctx); err != nil {
			return 0, err
		}
	}
	if r.fail != nil {
		if err := r.fail(e); err != nil {
			return 0, err
		}
	}
	index, err := r.f.write(func(i uint64) error {
		// The store takes ownership of what it is given; the entry itself
		// is shared with the applier.
		_, err := r.f.st.UpsertPlanResults(i, e.CloneVT())
		return err
	})
	if err != nil {
		return 0, err
	}
	if r.applied != nil {
		r.applied <- index
	}
	if r.holdAfterApply {
		if err := r.pass(ctx); err != nil {
			return 0, err
		}
	}
	return index, nil
}

// pass waits for a token from the gate, if there is one.
func (r *fakeRaft) pass(ctx context.Context) error {
	if r.gate == nil {
		return nil
	}
	select {
	case <-r.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// harness runs an applier over a fixture until the test ends.
type harness struct {
	*fixture
	raft    *fakeRaft
	queue   *Queue
	applier *Applier
	cancel  context.CancelFunc
	stopped chan struct{}
	// verified receives each plan's eval id once the applier checked it.
	verified chan string
}

// now is the injected clock: applied_at of every entry.
const now = int64(1_000_000)

func newHarness(t testing.TB, f *fixture, raft *fakeRaft, configure ...func(*Config)) *harness {
	t.Helper()
	raft.f = f
	h := &harness{fixture: f, raft: raft, queue: NewQueue(), stopped: make(chan struct{}), verified: make(chan string, 16)}
	h.queue.SetEnabled(true)
	cfg := Config{Now: func() int64 { return now }}
	for _, c := range configure {
		c(&cfg)
	}
	h.applier = NewApplier(cfg, h.queue, f.st, raft)
	h.applier.verified = func(p *droverv1.Plan) { h.verified <- p.GetEvalId() }
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.stopped)
		h.applier.Run(ctx)
	}()
	t.Cleanup(h.stop)
	return h
}

// stop ends Run and waits for it to return.
func (h *harness) stop() {
	h.t.Helper()
	h.cancel()
	select {
	case <-h.stopped:
	case <-time.After(testTimeout):
		h.t.Fatal("applier did not stop")
	}
}

func (h *harness) submit(p *droverv1.Plan) *Future {
	h.t.Helper()
	fut, err := h.queue.Enqueue(p)
	if err != nil {
		h.t.Fatalf("enqueue: %v", err)
	}
	return fut
}

// result waits for a plan's answer.
func result(t *testing.T, fut *Future) (*droverv1.PlanResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return fut.Wait(ctx)
}

func mustResult(t *testing.T, fut *Future) *droverv1.PlanResult {
	t.Helper()
	res, err := result(t, fut)
	if err != nil {
		t.Fatalf("plan result: %v", err)
	}
	return res
}

// receive waits for a value from ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// nodePlan builds a plan's part for a node.
func nodePlan(node *droverv1.Node, allocs []*droverv1.Allocation, stops ...*droverv1.AllocStop) *droverv1.NodePlan {
	return &droverv1.NodePlan{NodeId: node.GetId(), Allocations: allocs, Stops: stops}
}

func newPlan(ev *droverv1.Evaluation, nps ...*droverv1.NodePlan) *droverv1.Plan {
	return &droverv1.Plan{EvalId: ev.GetId(), JobId: ev.GetJobId(), Priority: ev.GetPriority(), NodePlans: nps}
}

func lostStop(id string) *droverv1.AllocStop {
	return &droverv1.AllocStop{AllocId: id, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP,
		ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST}
}

func plainStop(id string) *droverv1.AllocStop {
	return &droverv1.AllocStop{AllocId: id, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP}
}

// staticHTTP makes the job's "http" port a static one: a collision on it
// is the job's own choice, which the applier must not change.
func staticHTTP(j *droverv1.Job) { j.TaskGroups[0].Resources.Ports[0].Value = 21999 }
