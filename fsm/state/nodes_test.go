package state

import (
	"errors"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	initializing = droverv1.NodeStatus_NODE_STATUS_INITIALIZING
	ready        = droverv1.NodeStatus_NODE_STATUS_READY
	down         = droverv1.NodeStatus_NODE_STATUS_DOWN
	disconnected = droverv1.NodeStatus_NODE_STATUS_DISCONNECTED
)

func TestUpsertNodeCreatesInitializingNode(t *testing.T) {
	f := newFixture(t)
	n := mock.Node()
	n.Status = ready // a client cannot choose its status
	if _, err := upsertNode(f.s, 7, n, 42); err != nil {
		t.Fatal(err)
	}
	got := f.s.Snapshot().NodeByID(n.GetId())
	if got.GetStatus() != initializing {
		t.Errorf("status = %s, want initializing", got.GetStatus())
	}
	if got.GetSchedulingEligibility() != droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE {
		t.Errorf("eligibility = %s, want eligible", got.GetSchedulingEligibility())
	}
	if got.GetCreateIndex() != 7 || got.GetModifyIndex() != 7 || got.GetStatusUpdatedAt() != 42 {
		t.Errorf("indexes/time = %d/%d/%d, want 7/7/42", got.GetCreateIndex(), got.GetModifyIndex(), got.GetStatusUpdatedAt())
	}
	if len(got.GetEvents()) != 1 || got.GetEvents()[0].GetCreateIndex() != 7 {
		t.Errorf("events = %v, want one registration event at index 7", got.GetEvents())
	}
	if idx := f.s.Snapshot().TableIndex(TableNodes); idx != 7 {
		t.Errorf("nodes table index = %d, want 7", idx)
	}
}

func TestUpsertNodeKeepsServerOwnedFields(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	f.setStatus(n.GetId(), ready)
	f.setStatus(n.GetId(), disconnected)
	before := f.s.Snapshot().NodeByID(n.GetId())

	update := n.CloneVT()
	update.Name = "renamed"
	update.Status = ready
	update.LastMissedHeartbeatIndex = 0
	index := f.next()
	if _, err := upsertNode(f.s, index, update, 0); err != nil {
		t.Fatal(err)
	}
	got := f.s.Snapshot().NodeByID(n.GetId())
	if got.GetName() != "renamed" {
		t.Errorf("name = %q, want renamed", got.GetName())
	}
	if got.GetStatus() != disconnected {
		t.Errorf("status = %s, want disconnected kept", got.GetStatus())
	}
	if got.GetLastMissedHeartbeatIndex() != before.GetLastMissedHeartbeatIndex() || got.GetCreateIndex() != before.GetCreateIndex() {
		t.Errorf("indexes changed: got missed=%d create=%d, want %d %d", got.GetLastMissedHeartbeatIndex(), got.GetCreateIndex(),
			before.GetLastMissedHeartbeatIndex(), before.GetCreateIndex())
	}
	if got.GetModifyIndex() != index {
		t.Errorf("modify index = %d, want %d", got.GetModifyIndex(), index)
	}
}

func TestUpsertNodeRefusesAnotherSecret(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	impostor := n.CloneVT()
	impostor.SecretId = mock.ID()
	impostor.Name = "impostor"
	_, err := upsertNode(f.s, f.next(), impostor, 0)
	if !errors.Is(err, ErrSecretMismatch) {
		t.Fatalf("err = %v, want ErrSecretMismatch", err)
	}
	if got := f.s.Snapshot().NodeByID(n.GetId()); got.GetName() != n.GetName() {
		t.Errorf("refused registration changed the node: name %q", got.GetName())
	}
	if f.s.LatestIndex() != f.index {
		t.Errorf("latest index = %d, want %d: a refused entry still counts as applied", f.s.LatestIndex(), f.index)
	}
}

// TestUpsertNodesResultHoldsTheStoredNodes checks that a registration's
// result names each written node as the state stores it, which the
// proposer answers from, and nothing for a refused one: a new node, a
// known one re-registered (its status kept), and an impostor, in one
// entry.
func TestUpsertNodesResultHoldsTheStoredNodes(t *testing.T) {
	f := newFixture(t)
	known := f.node()
	f.setStatus(known.GetId(), droverv1.NodeStatus_NODE_STATUS_READY)
	again := known.CloneVT()
	again.Name = "renamed"
	impostor := f.node().CloneVT()
	impostor.SecretId = mock.ID()
	fresh := mock.Node()
	res, _, err := f.s.UpsertNodes(f.next(), &droverv1.NodeRegisterEntry{
		Nodes: []*droverv1.Node{fresh.CloneVT(), again, impostor}, RegisteredAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot()
	for i, id := range []string{fresh.GetId(), known.GetId()} {
		if stored := snap.NodeByID(id); res.Stored[i] != stored {
			t.Errorf("node %d: result holds %v, want the stored %v", i, res.Stored[i], stored)
		}
	}
	if got := res.Stored[1].GetStatus(); got != droverv1.NodeStatus_NODE_STATUS_READY {
		t.Errorf("re-registered node's status in the result = %s, want ready", got)
	}
	if !errors.Is(res.Errors[2], ErrSecretMismatch) || res.Stored[2] != nil {
		t.Errorf("impostor: error %v, stored %v; want ErrSecretMismatch and nothing", res.Errors[2], res.Stored[2])
	}
}

func TestUpdateNodeStatusTracksMissedHeartbeats(t *testing.T) {
	tests := []struct {
		name       string
		path       []droverv1.NodeStatus
		wantMissed bool // last_missed_heartbeat_index is the index of the first unresponsive step
	}{
		{"ready", []droverv1.NodeStatus{ready}, false},
		{"ready then down", []droverv1.NodeStatus{ready, down}, true},
		{"ready then disconnected", []droverv1.NodeStatus{ready, disconnected}, true},
		{"disconnected then back initializing keeps index", []droverv1.NodeStatus{ready, disconnected, initializing}, true},
		{"disconnected then down keeps first index", []droverv1.NodeStatus{ready, disconnected, down}, true},
		{"back to ready clears", []droverv1.NodeStatus{ready, down, initializing, ready}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			var firstMissed uint64
			for _, st := range tt.path {
				f.setStatus(n.GetId(), st)
				if st.IsUnresponsive() && firstMissed == 0 {
					firstMissed = f.index
				}
			}
			got := f.s.Snapshot().NodeByID(n.GetId()).GetLastMissedHeartbeatIndex()
			want := uint64(0)
			if tt.wantMissed {
				want = firstMissed
			}
			if got != want {
				t.Errorf("last missed heartbeat index = %d, want %d", got, want)
			}
		})
	}
}

func TestUpdateNodeStatusRejections(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	tests := []struct {
		name  string
		entry *droverv1.NodeStatusEntry
		want  error
	}{
		{"unknown node", &droverv1.NodeStatusEntry{NodeId: mock.ID(), Status: ready}, ErrNotFound},
		{"stale decision", &droverv1.NodeStatusEntry{NodeId: n.GetId(), Status: ready, ExpectedModifyIndex: n.GetModifyIndex() + 100}, ErrConflict},
		{"no status", &droverv1.NodeStatusEntry{NodeId: n.GetId()}, ErrInvalidEntry},
		{"unknown status", &droverv1.NodeStatusEntry{NodeId: n.GetId(), Status: 99}, ErrInvalidEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.s.UpdateNodeStatus(f.next(), tt.entry); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if got := f.s.Snapshot().NodeByID(n.GetId()); got.GetStatus() != initializing || got.GetModifyIndex() != n.GetModifyIndex() {
				t.Errorf("refused entry changed the node: %s at %d", got.GetStatus(), got.GetModifyIndex())
			}
		})
	}
}

func TestUpdateNodeStatusWritesEvalsInSameEntry(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(1)
	ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	index := f.next()
	changes, err := f.s.UpdateNodeStatus(index, &droverv1.NodeStatusEntry{
		NodeId: n.GetId(), Status: ready, ExpectedModifyIndex: n.GetModifyIndex(), Evals: []*droverv1.Evaluation{ev},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := f.s.Snapshot().EvalByID(ev.GetId())
	if got == nil || got.GetCreateIndex() != index {
		t.Fatalf("eval = %v, want created at %d", got, index)
	}
	tables := map[string]int{}
	for _, c := range changes {
		tables[c.Table]++
	}
	if tables[TableNodes] != 1 || tables[TableEvals] != 1 {
		t.Errorf("changes by table = %v, want one node and one eval", tables)
	}
}

func TestNodeCount(t *testing.T) {
	f := newFixture(t)
	a := f.node()
	f.node()
	again := a.CloneVT()
	if _, err := upsertNode(f.s, f.next(), again, 0); err != nil {
		t.Fatal(err)
	}
	if got := f.s.NodeCount(); got != 2 {
		t.Errorf("node count = %d, want 2 (re-registration does not count)", got)
	}
}
