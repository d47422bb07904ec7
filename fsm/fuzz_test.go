package fsm

import (
	"log/slog"
	"testing"

	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// FuzzDecodeApply feeds arbitrary bytes to Decode and applies whatever
// decodes to a state store holding a node, a job and an allocation. Neither
// may panic: a decodable entry with nonsense in it must be refused with an
// error, and a refused entry must leave the state as it was.
func FuzzDecodeApply(f *testing.F) {
	seed := newSeedState(f)
	for _, e := range seed.entries {
		f.Add(e)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgType, msg, err := Decode(data)
		if err != nil {
			return
		}
		st, err := state.NewStateStore()
		if err != nil {
			t.Fatal(err)
		}
		h := &FSM{state: st, events: events.NewBroker(events.Config{MaxEvents: 64}), logger: slog.New(slog.DiscardHandler)}
		for i, e := range seed.entries {
			_, m, _ := Decode(e)
			h.apply(uint64(i+1), droverv1.MessageType(e[0]), m)
		}
		before := st.Snapshot()
		resp := h.apply(uint64(len(seed.entries)+1), msgType, msg)
		if _, refused := resp.(error); refused {
			if diff := stateDiff(before, st.Snapshot()); diff != "" {
				t.Errorf("refused %s entry changed the state:\n%s", msgType, diff)
			}
		}
	})
}

type seedState struct {
	entries [][]byte
}

// newSeedState encodes one valid entry of every type, which both seeds the
// corpus and builds the state fuzzed entries are applied to.
func newSeedState(tb testing.TB) *seedState {
	n := mock.Node()
	job := mock.Job(1)
	ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	alloc := mock.Alloc(n, job, 0)
	alloc.EvalId = ev.GetId()
	msgs := []struct {
		t droverv1.MessageType
		m vtMessage
	}{
		{droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n}}},
		{droverv1.MessageTypeNodeStatus, &droverv1.NodeStatusEntry{NodeId: n.GetId(), Status: droverv1.NodeStatus_NODE_STATUS_READY}},
		{droverv1.MessageTypeNodeStatusBatch, &droverv1.NodeStatusBatchEntry{Updates: []*droverv1.NodeStatusEntry{
			{NodeId: n.GetId(), Status: droverv1.NodeStatus_NODE_STATUS_INITIALIZING}, {NodeId: n.GetId(), Status: droverv1.NodeStatus_NODE_STATUS_READY, ExpectedModifyIndex: 1}}}},
		{droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: job, Eval: ev}},
		{droverv1.MessageTypeEvalUpdate, &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)}}},
		{droverv1.MessageTypePlanResult, &droverv1.PlanResultEntry{Allocations: []*droverv1.Allocation{alloc}, EvalId: ev.GetId()}},
		{droverv1.MessageTypeAllocClientUpdate, &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{{NodeId: n.GetId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: alloc.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}}}}}},
		{droverv1.MessageTypeAllocClientReport, &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{{NodeId: n.GetId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: alloc.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE}}}}}},
		{droverv1.MessageTypeJobDeregister, &droverv1.JobDeregisterEntry{JobId: job.GetId(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), RequestId: "r1"}},
		{droverv1.MessageTypeServerUpsert, &droverv1.ServerUpsertEntry{Server: &droverv1.ServerMember{Id: "s1", RpcAddr: "a:1", RaftAddr: "a:2"}}},
		{droverv1.MessageTypeServerRemove, &droverv1.ServerRemoveEntry{ServerId: "s1"}},
		{droverv1.MessageTypeNodeEligibility, &droverv1.NodeEligibilityEntry{NodeId: n.GetId(), Eligibility: droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE}},
		{droverv1.MessageTypeNodeDrain, &droverv1.NodeDrainEntry{NodeId: n.GetId(), DrainStrategy: &droverv1.DrainStrategy{StartedAt: 1}}},
		{droverv1.MessageTypeAllocTransition, &droverv1.AllocDesiredTransitionEntry{
			Transitions: map[string]*droverv1.DesiredTransition{alloc.GetId(): {Migrate: true}}, Evals: []*droverv1.Evaluation{mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_DRAIN)}}},
		{droverv1.MessageTypeGC, &droverv1.GCEntry{NodeIds: []string{n.GetId()}, AllocIds: []string{alloc.GetId()}, EvalIds: []string{ev.GetId()}, JobIds: []string{job.GetId()},
			JobVersions: []*droverv1.JobVersionRef{{JobId: job.GetId(), Version: 0}}}},
		{droverv1.MessageTypeClusterMetadata, &droverv1.ClusterMetadataEntry{Metadata: &droverv1.ClusterMetadata{ClusterId: "c1", CreatedAt: 1}}},
	}
	s := &seedState{}
	for _, m := range msgs {
		data, err := Encode(m.t, m.m)
		if err != nil {
			tb.Fatal(err)
		}
		s.entries = append(s.entries, data)
	}
	return s
}
