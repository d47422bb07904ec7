package state

import (
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// fixture is a state store with a write index counter, so tests read like
// a sequence of raft entries.
type fixture struct {
	t     testing.TB
	s     *StateStore
	index uint64
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, s: s}
}

func (f *fixture) next() uint64 {
	f.index++
	return f.index
}

// node registers a new mock node and returns it as stored.
func (f *fixture) node() *droverv1.Node {
	f.t.Helper()
	n := mock.Node()
	if _, err := upsertNode(f.s, f.next(), n.CloneVT(), 1); err != nil {
		f.t.Fatalf("register node: %v", err)
	}
	return f.s.Snapshot().NodeByID(n.GetId())
}

func (f *fixture) setStatus(nodeID string, status droverv1.NodeStatus) {
	f.t.Helper()
	if _, err := f.s.UpdateNodeStatus(f.next(), &droverv1.NodeStatusEntry{NodeId: nodeID, Status: status, UpdatedAt: 2}); err != nil {
		f.t.Fatalf("set node %s %s: %v", nodeID, status, err)
	}
}

// job registers a mock job of count allocations and returns it as stored.
func (f *fixture) job(count int32) *droverv1.Job {
	f.t.Helper()
	j := mock.Job(count)
	f.register(j)
	return f.s.Snapshot().JobByID(j.GetId())
}

func (f *fixture) register(j *droverv1.Job) {
	f.t.Helper()
	e := &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), SubmittedAt: 3}
	if _, _, err := f.s.UpsertJob(f.next(), e); err != nil {
		f.t.Fatalf("register job %s: %v", j.GetId(), err)
	}
}

// place writes allocations through a plan result and returns them as stored.
func (f *fixture) place(allocs ...*droverv1.Allocation) []*droverv1.Allocation {
	f.t.Helper()
	e := &droverv1.PlanResultEntry{AppliedAt: 4}
	for _, a := range allocs {
		e.Allocations = append(e.Allocations, a.CloneVT())
	}
	if _, err := f.s.UpsertPlanResults(f.next(), e); err != nil {
		f.t.Fatalf("place allocations: %v", err)
	}
	snap := f.s.Snapshot()
	out := make([]*droverv1.Allocation, len(allocs))
	for i, a := range allocs {
		out[i] = snap.AllocByID(a.GetId())
	}
	return out
}

func (f *fixture) report(nodeID string, status droverv1.AllocClientStatus, allocIDs ...string) *ClientUpdateResult {
	f.t.Helper()
	group := &droverv1.NodeAllocUpdates{NodeId: nodeID}
	for _, id := range allocIDs {
		group.Allocs = append(group.Allocs, &droverv1.AllocClientUpdate{AllocId: id, ClientStatus: status})
	}
	res, _, err := f.s.UpdateAllocsFromClient(f.next(), &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{group}, UpdatedAt: 5})
	if err != nil {
		f.t.Fatalf("report allocations: %v", err)
	}
	return res
}

func ids(allocs []*droverv1.Allocation) []string {
	out := make([]string, len(allocs))
	for i, a := range allocs {
		out[i] = a.GetId()
	}
	return out
}

// upsertNode registers one node in its own entry and returns the changes
// and the node's refusal, if any.
func upsertNode(s *StateStore, index uint64, n *droverv1.Node, registeredAt int64) ([]Change, error) {
	res, changes, err := s.UpsertNodes(index, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n}, RegisteredAt: registeredAt})
	if err != nil {
		return nil, err
	}
	return changes, res.Errors[0]
}
