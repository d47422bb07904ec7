package invariant

import (
	"strings"
	"testing"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// build writes a node, a job of count 2 and the given allocations (made by
// mutate from three fresh ones) and returns the snapshot.
func build(t *testing.T, mutate func(node *droverv1.Node, job *droverv1.Job, allocs []*droverv1.Allocation) []*droverv1.Allocation) *state.Snapshot {
	t.Helper()
	s, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	node := mock.Node()
	res, _, err := s.UpsertNodes(1, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{node.CloneVT()}, RegisteredAt: 1})
	if err != nil || res.Errors[0] != nil {
		t.Fatalf("register node: %v %v", err, res.Errors)
	}
	job := mock.Job(2)
	if _, _, err := s.UpsertJob(2, &droverv1.JobRegisterEntry{Job: job.CloneVT(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), SubmittedAt: 2}); err != nil {
		t.Fatal(err)
	}
	job = s.Snapshot().JobByID(job.GetId())
	fresh := []*droverv1.Allocation{mock.Alloc(node, job, 0), mock.Alloc(node, job, 1), mock.Alloc(node, job, 2)}
	allocs := mutate(node, job, fresh)
	if _, err := s.UpsertPlanResults(3, &droverv1.PlanResultEntry{Allocations: allocs, AppliedAt: 3}); err != nil {
		t.Fatal(err)
	}
	return s.Snapshot()
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*droverv1.Node, *droverv1.Job, []*droverv1.Allocation) []*droverv1.Allocation
		want   string // substring of the single expected violation; "" for none
	}{
		{"valid", func(_ *droverv1.Node, _ *droverv1.Job, a []*droverv1.Allocation) []*droverv1.Allocation { return a[:2] }, ""},
		{"over count", func(_ *droverv1.Node, _ *droverv1.Job, a []*droverv1.Allocation) []*droverv1.Allocation { return a }, "3 allocations wanted running, count is 2"},
		{"cpu over", func(n *droverv1.Node, _ *droverv1.Job, a []*droverv1.Allocation) []*droverv1.Allocation {
			a[0].Resources.CpuMhz = n.GetResources().GetCpuMhz()
			return a[:2]
		}, "over its resources"},
		{"port twice", func(_ *droverv1.Node, _ *droverv1.Job, a []*droverv1.Allocation) []*droverv1.Allocation {
			a[1].Resources.Ports[0].Value = a[0].GetResources().GetPorts()[0].GetValue()
			return a[:2]
		}, "ports: port"},
		{"address twice", func(_ *droverv1.Node, _ *droverv1.Job, a []*droverv1.Allocation) []*droverv1.Allocation {
			a[1].Resources.Ip = a[0].GetResources().GetIp()
			return a[:2]
		}, "address"},
		{"terminal allocations hold nothing", func(_ *droverv1.Node, _ *droverv1.Job, a []*droverv1.Allocation) []*droverv1.Allocation {
			a[2].Resources.Ip = a[0].GetResources().GetIp()
			a[2].ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
			return a
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := Check(build(t, tt.mutate))
			if tt.want == "" {
				if len(errs) != 0 {
					t.Fatalf("Check = %v, want no violation", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("Check found nothing, want %q", tt.want)
			}
			found := false
			for _, err := range errs {
				found = found || strings.Contains(err.Error(), tt.want)
			}
			if !found {
				t.Fatalf("Check = %v, want one containing %q", errs, tt.want)
			}
		})
	}
}
