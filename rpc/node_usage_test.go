package rpc

import (
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// TestUsageOf sums what a node's allocations hold: every allocation that is
// not client-terminal, whatever the servers want of it, and nothing of the
// complete, failed or lost ones. Each case is also checked against the
// scheduler's own arithmetic (fit.Usage), which the topology view must not
// contradict.
func TestUsageOf(t *testing.T) {
	const (
		pending  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
		running  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
		complete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
		failed   = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
		lost     = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
		unknown  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
		run      = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
		stop     = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP
		evict    = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_EVICT
	)
	alloc := func(id string, client droverv1.AllocClientStatus, desired droverv1.AllocDesiredStatus, cpu, mem int64) *droverv1.Allocation {
		return &droverv1.Allocation{Id: id, ClientStatus: client, DesiredStatus: desired,
			Resources: &droverv1.AllocatedResources{CpuMhz: cpu, MemoryMb: mem}}
	}
	node := &droverv1.Node{
		Resources: &droverv1.NodeResources{CpuMhz: 4000, MemoryMb: 8192},
		Reserved:  &droverv1.NodeReservedResources{CpuMhz: 100, MemoryMb: 256},
	}
	bare := &droverv1.Node{Resources: &droverv1.NodeResources{CpuMhz: 1000, MemoryMb: 2048}}
	cases := []struct {
		name    string
		node    *droverv1.Node
		allocs  []*droverv1.Allocation
		capCPU  int64
		capMem  int64
		usedCPU int64
		usedMem int64
	}{
		{name: "no allocations", node: node, capCPU: 3900, capMem: 7936},
		{name: "nothing reserved", node: bare, capCPU: 1000, capMem: 2048,
			allocs: []*droverv1.Allocation{alloc("a", running, run, 250, 512)}, usedCPU: 250, usedMem: 512},
		{name: "pending and running count", node: node, capCPU: 3900, capMem: 7936,
			allocs:  []*droverv1.Allocation{alloc("a", pending, run, 100, 128), alloc("b", running, run, 500, 1024)},
			usedCPU: 600, usedMem: 1152},
		{name: "complete, failed and lost do not count", node: node, capCPU: 3900, capMem: 7936,
			allocs: []*droverv1.Allocation{
				alloc("a", running, run, 100, 128),
				alloc("b", complete, run, 1000, 1000),
				alloc("c", failed, run, 1000, 1000),
				alloc("d", lost, stop, 1000, 1000),
			},
			usedCPU: 100, usedMem: 128},
		{name: "unknown on a disconnected node still holds", node: node, capCPU: 3900, capMem: 7936,
			allocs: []*droverv1.Allocation{alloc("a", unknown, run, 300, 256)}, usedCPU: 300, usedMem: 256},
		{name: "wanted stopped but still running holds until its agent reports", node: node, capCPU: 3900, capMem: 7936,
			allocs:  []*droverv1.Allocation{alloc("a", running, stop, 200, 64), alloc("b", running, evict, 100, 32), alloc("c", complete, stop, 999, 999)},
			usedCPU: 300, usedMem: 96},
		{name: "an allocation without resources holds nothing", node: node, capCPU: 3900, capMem: 7936,
			allocs: []*droverv1.Allocation{{Id: "a", ClientStatus: running, DesiredStatus: run}}},
		{name: "more than the node offers is shown as it is", node: bare, capCPU: 1000, capMem: 2048,
			allocs:  []*droverv1.Allocation{alloc("a", running, run, 800, 2000), alloc("b", running, run, 800, 2000)},
			usedCPU: 1600, usedMem: 4000},
		{name: "a node without resources offers nothing", node: &droverv1.Node{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := usageOf(c.node, c.allocs)
			if got := u.GetCapacity(); got.GetCpuMhz() != c.capCPU || got.GetMemoryMb() != c.capMem {
				t.Errorf("capacity %d MHz %d MB, want %d MHz %d MB", got.GetCpuMhz(), got.GetMemoryMb(), c.capCPU, c.capMem)
			}
			if got := u.GetUsed(); got.GetCpuMhz() != c.usedCPU || got.GetMemoryMb() != c.usedMem {
				t.Errorf("used %d MHz %d MB, want %d MHz %d MB", got.GetCpuMhz(), got.GetMemoryMb(), c.usedCPU, c.usedMem)
			}
			f := fit.NewUsage(c.node)
			for _, a := range c.allocs {
				f.Add(a)
			}
			if cpu, mem, _ := f.Capacity(); cpu != u.GetCapacity().GetCpuMhz() || mem != u.GetCapacity().GetMemoryMb() {
				t.Errorf("capacity %v, the scheduler's %d MHz %d MB", u.GetCapacity(), cpu, mem)
			}
			if f.CPU != u.GetUsed().GetCpuMhz() || f.Memory != u.GetUsed().GetMemoryMb() {
				t.Errorf("used %v, the scheduler's %d MHz %d MB", u.GetUsed(), f.CPU, f.Memory)
			}
		})
	}
}

// TestUsageOfDescribesTheNode copies what the view shows of the node.
func TestUsageOfDescribesTheNode(t *testing.T) {
	n := &droverv1.Node{
		Id: "4b1c7a52-0d5e-4f7a-9a43-1f0b6c2d9e10", SecretId: "secret", Name: "n1", Datacenter: "dc2", NodeClass: "gpu",
		Status:                droverv1.NodeStatus_NODE_STATUS_DOWN,
		SchedulingEligibility: droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE,
		DrainStrategy:         &droverv1.DrainStrategy{StartedAt: 1},
		ModifyIndex:           42,
	}
	u := usageOf(n, nil)
	want := &droverv1.NodeUsage{
		Id: n.GetId(), Name: "n1", Datacenter: "dc2", NodeClass: "gpu",
		Status: n.GetStatus(), SchedulingEligibility: n.GetSchedulingEligibility(), Draining: true,
		Capacity: &droverv1.CpuMemory{}, Used: &droverv1.CpuMemory{}, ModifyIndex: 42,
	}
	if !u.EqualVT(want) {
		t.Fatalf("usage %v, want %v", u, want)
	}
}
