package fsm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// harness applies entries to an FSM as raft would, one index at a time.
type harness struct {
	t      *testing.T
	fsm    *FSM
	events *events.Broker
	index  uint64
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	broker := events.NewBroker(events.Config{})
	t.Cleanup(broker.Close)
	return &harness{t: t, fsm: New(st, broker, slog.New(slog.DiscardHandler)), events: broker}
}

// apply encodes and applies one entry and returns Apply's response.
func (h *harness) apply(msgType droverv1.MessageType, msg vtMessage) any {
	h.t.Helper()
	data, err := Encode(msgType, msg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.index++
	return h.fsm.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data})
}

func (h *harness) mustApply(msgType droverv1.MessageType, msg vtMessage) any {
	h.t.Helper()
	resp := h.apply(msgType, msg)
	if err, ok := resp.(error); ok {
		h.t.Fatalf("apply %s: %v", msgType, err)
	}
	return resp
}

// populate writes a bit of everything: nodes in several statuses, a job
// with two versions, a stopped job, job writes with request ids,
// evaluations, placed, stopped and reported allocations, servers.
func (h *harness) populate() {
	h.t.Helper()
	nodes := []*droverv1.Node{mock.Node(), mock.Node(), mock.Node()}
	for _, n := range nodes {
		h.mustApply(droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n.CloneVT()}, RegisteredAt: 10})
	}
	h.mustApply(droverv1.MessageTypeNodeStatus, &droverv1.NodeStatusEntry{NodeId: nodes[0].GetId(), Status: droverv1.NodeStatus_NODE_STATUS_READY, UpdatedAt: 11})
	h.mustApply(droverv1.MessageTypeNodeStatus, &droverv1.NodeStatusEntry{NodeId: nodes[1].GetId(), Status: droverv1.NodeStatus_NODE_STATUS_DOWN, UpdatedAt: 12})

	secret := sha256.Sum256([]byte("bootstrap-secret"))
	h.mustApply(droverv1.MessageTypeACLBootstrap, &droverv1.ACLBootstrapEntry{Token: &droverv1.ACLToken{
		AccessorId: "8a6e0804-2bd0-4672-b79d-d97027f9071e", SecretHash: secret[:], Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT}})
	h.mustApply(droverv1.MessageTypeACLPolicy, &droverv1.ACLPolicyEntry{Upserts: []*droverv1.ACLPolicy{{Name: "readers", Rules: `node { policy = "read" }`}}})

	web := mock.Job(3)
	h.mustApply(droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: web.CloneVT(), Eval: mock.Eval(web, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)})
	web.TaskGroups[0].Count = 4
	h.mustApply(droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: web.CloneVT(), Eval: mock.Eval(web, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)})
	web.Version = 1
	old := mock.Job(1)
	h.mustApply(droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: old.CloneVT(), Eval: mock.Eval(old, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)})
	h.mustApply(droverv1.MessageTypeJobDeregister, &droverv1.JobDeregisterEntry{JobId: old.GetId(), Eval: mock.Eval(old, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), RequestId: "stop-old", DeregisteredAt: 9})
	batch := mock.Job(1)
	h.mustApply(droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: batch.CloneVT(), Eval: mock.Eval(batch, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), RequestId: "reg-batch", SubmittedAt: 9})

	for _, id := range []string{"server-b", "server-a", "server-c"} {
		h.mustApply(droverv1.MessageTypeServerUpsert, &droverv1.ServerUpsertEntry{Server: &droverv1.ServerMember{Id: id, RpcAddr: id + ":4647", RaftAddr: id + ":4648", Version: "0.1.0"}})
	}
	h.mustApply(droverv1.MessageTypeServerRemove, &droverv1.ServerRemoveEntry{ServerId: "server-c"})

	ev := mock.Eval(web, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	h.mustApply(droverv1.MessageTypeEvalUpdate, &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{ev}})
	allocs := []*droverv1.Allocation{mock.Alloc(nodes[0], web, 0), mock.Alloc(nodes[0], web, 1), mock.Alloc(nodes[2], web, 2)}
	for _, a := range allocs {
		a.EvalId = ev.GetId()
	}
	h.mustApply(droverv1.MessageTypePlanResult, &droverv1.PlanResultEntry{Allocations: allocs, EvalId: ev.GetId(), AppliedAt: 13})
	h.mustApply(droverv1.MessageTypePlanResult, &droverv1.PlanResultEntry{Stops: []*droverv1.AllocStop{{
		AllocId: allocs[2].GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST,
	}}, AppliedAt: 14})
	h.mustApply(droverv1.MessageTypeAllocClientUpdate, &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{{
		NodeId: nodes[0].GetId(),
		Allocs: []*droverv1.AllocClientUpdate{{AllocId: allocs[0].GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}},
	}}, UpdatedAt: 15})
}

func TestApplyPublishesEvents(t *testing.T) {
	h := newHarness(t)
	sub, err := h.events.Subscribe(events.SubscribeRequest{FromIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := mock.Node()
	h.mustApply(droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n.CloneVT()}})
	job := mock.Job(1)
	ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	h.mustApply(droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: job.CloneVT(), Eval: ev})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	first, err := sub.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) != 1 || first.Index != 1 {
		t.Fatalf("first batch: %d events at %d, want 1 at 1", len(first.Events), first.Index)
	}
	got := first.Events[0]
	if got.GetTopic() != droverv1.Topic_TOPIC_NODE || got.GetType() != "NodeRegistered" || got.GetKey() != n.GetId() {
		t.Errorf("node event = %s %s %s", got.GetTopic(), got.GetType(), got.GetKey())
	}
	if got.GetNode() != h.fsm.State().Snapshot().NodeByID(n.GetId()) {
		t.Errorf("node event does not carry the stored node")
	}
	second, err := sub.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	topics := map[droverv1.Topic]string{}
	for _, e := range second.Events {
		topics[e.GetTopic()] = e.GetType()
	}
	if topics[droverv1.Topic_TOPIC_JOB] != "JobRegistered" || topics[droverv1.Topic_TOPIC_EVALUATION] != "JobRegistered" {
		t.Errorf("job registration events = %v, want a job and an evaluation event", topics)
	}
}

func TestApplyReturnsStoreErrorsAndResults(t *testing.T) {
	h := newHarness(t)
	resp := h.apply(droverv1.MessageTypeNodeStatus, &droverv1.NodeStatusEntry{NodeId: mock.ID(), Status: droverv1.NodeStatus_NODE_STATUS_READY})
	if err, ok := resp.(error); !ok || !errors.Is(err, state.ErrNotFound) {
		t.Errorf("status of unknown node: response %v, want an error wrapping ErrNotFound", resp)
	}
	resp = h.apply(droverv1.MessageTypeAllocClientUpdate, &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{{NodeId: mock.ID()}}})
	res, ok := resp.(*state.ClientUpdateResult)
	if !ok || len(res.RefusedNodes) != 1 {
		t.Errorf("client update for an unknown node: response %#v, want a result refusing it", resp)
	}
}

func TestApplyJobWritesReturnRequestResults(t *testing.T) {
	h := newHarness(t)
	job := mock.Job(1)
	tests := []struct {
		name      string
		msgType   droverv1.MessageType
		entry     func() vtMessage
		requestID string
		// wantIndex is the index the result names, relative to the
		// entry's own: 0 for an applied write, -1 for a replay of the
		// previous one.
		wantIndex int
	}{
		{"register without request id", droverv1.MessageTypeJobRegister, func() vtMessage {
			return &droverv1.JobRegisterEntry{Job: job.CloneVT(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)}
		}, "", 0},
		{"register", droverv1.MessageTypeJobRegister, func() vtMessage {
			return &droverv1.JobRegisterEntry{Job: job.CloneVT(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), RequestId: "a"}
		}, "a", 0},
		{"register replay", droverv1.MessageTypeJobRegister, func() vtMessage {
			return &droverv1.JobRegisterEntry{Job: job.CloneVT(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), RequestId: "a"}
		}, "a", -1},
		{"deregister", droverv1.MessageTypeJobDeregister, func() vtMessage {
			return &droverv1.JobDeregisterEntry{JobId: job.GetId(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), RequestId: "b"}
		}, "b", 0},
		{"deregister replay", droverv1.MessageTypeJobDeregister, func() vtMessage {
			return &droverv1.JobDeregisterEntry{JobId: job.GetId(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), RequestId: "b"}
		}, "b", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.mustApply(tt.msgType, tt.entry())
			res, ok := resp.(*droverv1.JobRequestResult)
			if !ok {
				t.Fatalf("response %T, want *droverv1.JobRequestResult", resp)
			}
			if want := uint64(int(h.index) + tt.wantIndex); res.GetIndex() != want || res.GetRequestId() != tt.requestID || res.GetJobId() != job.GetId() {
				t.Errorf("result %v, want request %q at index %d", res, tt.requestID, want)
			}
			if tt.wantIndex == 0 && h.fsm.State().Snapshot().EvalByID(res.GetEvalId()).GetCreateIndex() != h.index {
				t.Errorf("result names evaluation %s, not the one written at %d", res.GetEvalId(), h.index)
			}
		})
	}
}

func TestApplyServerEntries(t *testing.T) {
	h := newHarness(t)
	sub, err := h.events.Subscribe(events.SubscribeRequest{FromIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	member := &droverv1.ServerMember{Id: "s1", RpcAddr: "10.0.0.1:4647", RaftAddr: "10.0.0.1:4648", Version: "0.1.0"}
	if resp := h.mustApply(droverv1.MessageTypeServerUpsert, &droverv1.ServerUpsertEntry{Server: member.CloneVT()}); resp != nil {
		t.Errorf("server upsert response %v, want nil", resp)
	}
	got := h.fsm.State().Snapshot().ServerByID("s1")
	if got.GetRpcAddr() != member.GetRpcAddr() || got.GetCreateIndex() != h.index || got.GetModifyIndex() != h.index {
		t.Errorf("stored server %v, want it created at %d", got, h.index)
	}
	resp := h.apply(droverv1.MessageTypeServerUpsert, &droverv1.ServerUpsertEntry{Server: &droverv1.ServerMember{Id: "s2"}})
	if err, ok := resp.(error); !ok || !errors.Is(err, state.ErrInvalidEntry) {
		t.Errorf("server without addresses: response %v, want ErrInvalidEntry", resp)
	}
	h.mustApply(droverv1.MessageTypeServerRemove, &droverv1.ServerRemoveEntry{ServerId: "s1"})
	if h.fsm.State().Snapshot().ServerByID("s1") != nil {
		t.Errorf("removed server still stored")
	}
	h.mustApply(droverv1.MessageTypeServerRemove, &droverv1.ServerRemoveEntry{ServerId: "s1"})
	if got := h.fsm.State().LatestIndex(); got != h.index {
		t.Errorf("latest index %d, want %d", got, h.index)
	}

	// Server records have no event topic: the next events are the node's.
	n := mock.Node()
	h.mustApply(droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	batch, err := sub.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if batch.Index != h.index || len(batch.Events) != 1 || batch.Events[0].GetTopic() != droverv1.Topic_TOPIC_NODE {
		t.Errorf("first event batch at %d with %d events, want the node's at %d", batch.Index, len(batch.Events), h.index)
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.populate()

	store, err := raft.NewFileSnapshotStore(t.TempDir(), 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := h.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Create(raft.SnapshotVersionMax, h.index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	restored := newHarness(t)
	sub, err := restored.events.Subscribe(events.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := store.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.fsm.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if diff := stateDiff(h.fsm.State().Snapshot(), restored.fsm.State().Snapshot()); diff != "" {
		t.Errorf("restored state differs:\n%s", diff)
	}
	rs := restored.fsm.State().Snapshot()
	if releaseOrder(rs) == "" {
		t.Errorf("restored state has no released address; populate releases one")
	}
	if rs.ACLBootstrap() == nil || rs.ACLPolicy("readers") == nil {
		t.Errorf("restored state lacks the ACL records populate wrote")
	}
	if rs.ServerByID("server-a") == nil || rs.ServerByID("server-c") != nil || rs.JobRequestResult("stop-old") == nil || rs.JobRequestResult("reg-batch") == nil {
		t.Errorf("restored state lacks the servers or job request results populate wrote")
	}
	if got := restored.fsm.State().LatestIndex(); got != h.index {
		t.Errorf("restored latest index = %d, want %d", got, h.index)
	}
	if _, err := sub.Next(t.Context()); !errors.Is(err, events.ErrSubscriptionClosed) {
		t.Errorf("subscriber after restore: %v, want ErrSubscriptionClosed", err)
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	h := newHarness(t)
	h.populate()
	var good strings.Builder
	if err := WriteSnapshot(&good, h.fsm.State().Snapshot(), h.index); err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"empty":          "",
		"bad magic":      "NOTASNAPSHOT" + good.String()[10:],
		"truncated":      good.String()[:len(good.String())-7],
		"unknown record": good.String() + "\x63\x01\x00",
		"future format":  string(snapshotMagic) + "\x02\x08\x09",
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			target := newHarness(t)
			n := mock.Node()
			target.mustApply(droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n}})
			if err := target.fsm.Restore(io.NopCloser(strings.NewReader(data))); err == nil {
				t.Fatal("Restore accepted a bad snapshot")
			}
			if target.fsm.State().Snapshot().NodeByID(n.GetId()) == nil {
				t.Errorf("a failed restore replaced the state")
			}
		})
	}
}

// TestSnapshotHeaderCarriesIPReleases checks that the release history
// travels in the header, where a server of a release without it skips it
// as an unknown field, and not as records, which such a server refuses.
func TestSnapshotHeaderCarriesIPReleases(t *testing.T) {
	h := newHarness(t)
	h.populate()
	var buf strings.Builder
	if err := WriteSnapshot(&buf, h.fsm.State().Snapshot(), h.index); err != nil {
		t.Fatal(err)
	}
	data, err := readRecord(bufio.NewReader(strings.NewReader(buf.String()[len(snapshotMagic):])))
	if err != nil {
		t.Fatal(err)
	}
	var header droverv1.SnapshotHeader
	if err := header.UnmarshalVT(data); err != nil {
		t.Fatal(err)
	}
	want := slices.Collect(h.fsm.State().Snapshot().IPBlockReleases())
	if len(want) == 0 || len(header.GetIpReleases()) != len(want) {
		t.Fatalf("header has %d blocks of release history, want %d (populate releases an address)", len(header.GetIpReleases()), len(want))
	}
	for i, b := range header.GetIpReleases() {
		if !b.EqualVT(want[i]) {
			t.Errorf("block %d of the header's history: %v, want %v", i, b, want[i])
		}
	}
}

func TestDigestMatchesAfterRestore(t *testing.T) {
	h := newHarness(t)
	h.populate()
	var buf strings.Builder
	if err := WriteSnapshot(&buf, h.fsm.State().Snapshot(), h.index); err != nil {
		t.Fatal(err)
	}
	restored := newHarness(t)
	if err := restored.fsm.Restore(io.NopCloser(strings.NewReader(buf.String()))); err != nil {
		t.Fatal(err)
	}
	want, got := mustDigest(t, h.fsm.State().Snapshot()), mustDigest(t, restored.fsm.State().Snapshot())
	for table, d := range want {
		if got[table] != d {
			t.Errorf("table %s: digest %s after restore, want %s", table, got[table], d)
		}
	}
	// A single change shows in its table's digest only.
	restored.mustApply(droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{mock.Node()}})
	changed := mustDigest(t, restored.fsm.State().Snapshot())
	if changed[state.TableNodes] == want[state.TableNodes] || changed[state.TableJobs] != want[state.TableJobs] {
		t.Errorf("after adding a node: nodes digest changed %v, jobs digest changed %v",
			changed[state.TableNodes] != want[state.TableNodes], changed[state.TableJobs] != want[state.TableJobs])
	}
}

func mustDigest(t *testing.T, snap *state.Snapshot) map[string]string {
	t.Helper()
	d, err := snap.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
