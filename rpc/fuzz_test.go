package rpc

import (
	"testing"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// FuzzRequestValidation decodes arbitrary bytes as the requests that write
// to raft and validates them as the handlers do. Validation must never
// panic, and whatever it accepts the state store must accept too: a request
// that passes validation and then fails in the FSM would surface to the
// client as an internal error instead of a field violation.
func FuzzRequestValidation(f *testing.F) {
	node, _ := (&droverv1.RegisterNodeRequest{Node: mock.Node()}).MarshalVT()
	job, _ := (&droverv1.RegisterJobRequest{Job: mock.Job(2)}).MarshalVT()
	update, _ := (&droverv1.UpdateAllocRequest{NodeId: mock.ID(), SecretId: mock.ID(),
		Allocs: []*droverv1.AllocClientUpdate{{AllocId: mock.ID(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}}}).MarshalVT()
	f.Add(byte(0), node)
	f.Add(byte(1), job)
	f.Add(byte(2), update)
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		st, err := state.NewStateStore()
		if err != nil {
			t.Fatal(err)
		}
		switch kind % 3 {
		case 0:
			req := &droverv1.RegisterNodeRequest{}
			if req.UnmarshalVT(data) != nil || req.Validate() != nil {
				return
			}
			req.GetNode().ClearServerFields()
			res, _, err := st.UpsertNodes(1, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{req.GetNode()}})
			if err != nil || res.Errors[0] != nil {
				t.Fatalf("valid node refused by the state store: %v %v", err, res)
			}
		case 1:
			req := &droverv1.RegisterJobRequest{}
			if req.UnmarshalVT(data) != nil {
				return
			}
			if j := req.GetJob(); j != nil {
				j.ClearServerFields()
				j.Canonicalize()
			}
			if req.Validate() != nil {
				return
			}
			ev := mock.Eval(req.GetJob(), droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
			if _, _, err := st.UpsertJob(1, &droverv1.JobRegisterEntry{Job: req.GetJob(), Eval: ev}); err != nil {
				t.Fatalf("valid job refused by the state store: %v", err)
			}
		case 2:
			req := &droverv1.UpdateAllocRequest{}
			if req.UnmarshalVT(data) != nil || req.Validate() != nil {
				return
			}
			entry := &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{{NodeId: req.GetNodeId(), Allocs: req.GetAllocs()}}}
			if _, _, err := st.UpdateAllocsFromClient(1, entry); err != nil {
				t.Fatalf("valid report refused by the state store: %v", err)
			}
		}
	})
}
