package state

import (
	"errors"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestNodeStatusBatch applies heartbeats' status changes that share one
// entry: each is applied or refused on its own, and the refusals are
// reported at their positions.
func TestNodeStatusBatch(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.node(), f.node(), f.node()
	ready := droverv1.NodeStatus_NODE_STATUS_READY
	e := &droverv1.NodeStatusBatchEntry{Updates: []*droverv1.NodeStatusEntry{
		{NodeId: a.GetId(), Status: ready, ExpectedModifyIndex: a.GetModifyIndex(), UpdatedAt: 5},
		{NodeId: b.GetId(), Status: ready, ExpectedModifyIndex: b.GetModifyIndex() + 1, UpdatedAt: 5}, // stale view
		{NodeId: mock.ID(), Status: ready, UpdatedAt: 5},                                              // unknown node
		{NodeId: c.GetId(), Status: ready, UpdatedAt: 5,
			Evals: []*droverv1.Evaluation{mock.Eval(mock.Job(1), droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)}},
	}}
	e.Updates[3].Evals[0].NodeId = c.GetId()
	index := f.next()
	res, _, err := f.s.UpdateNodeStatuses(index, e)
	if err != nil {
		t.Fatal(err)
	}
	wantErrs := []error{nil, ErrConflict, ErrNotFound, nil}
	for i, want := range wantErrs {
		if got := res.Errors[i]; (want == nil) != (got == nil) || (want != nil && !errors.Is(got, want)) {
			t.Errorf("update %d: error %v, want %v", i, got, want)
		}
	}
	snap := f.s.Snapshot()
	for _, tc := range []struct {
		node *droverv1.Node
		want droverv1.NodeStatus
	}{{a, ready}, {b, droverv1.NodeStatus_NODE_STATUS_INITIALIZING}, {c, ready}} {
		got := snap.NodeByID(tc.node.GetId())
		if got.GetStatus() != tc.want {
			t.Errorf("node %s: %s, want %s", tc.node.GetId(), got.GetStatus(), tc.want)
		}
		if tc.want == ready && got.GetModifyIndex() != index {
			t.Errorf("node %s: modify index %d, want the entry's %d", tc.node.GetId(), got.GetModifyIndex(), index)
		}
	}
	ev := snap.EvalByID(e.Updates[3].Evals[0].GetId())
	if ev == nil || ev.GetNodeModifyIndex() != index {
		t.Errorf("evaluation of node %s: %v, want it written with node modify index %d", c.GetId(), ev, index)
	}
}
