package plan

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	ready        = droverv1.NodeStatus_NODE_STATUS_READY
	down         = droverv1.NodeStatus_NODE_STATUS_DOWN
	disconnected = droverv1.NodeStatus_NODE_STATUS_DISCONNECTED
	initializing = droverv1.NodeStatus_NODE_STATUS_INITIALIZING

	running  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	complete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	failed   = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
	lost     = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
	unknown  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
)

// Mock nodes offer 3900 MHz and 7936 MB to allocations.
const (
	nodeCPU    = 3900
	nodeMemory = 7936
)

func ineligible(n *droverv1.Node) {
	n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
}

func draining(n *droverv1.Node) { n.DrainStrategy = &droverv1.DrainStrategy{StartedAt: 1} }

func port(a *droverv1.Allocation) int32 { return a.GetResources().GetPorts()[0].GetValue() }

// verifyCase builds state and a plan. want holds, for each node plan in
// order, "" if it must be accepted, else a part of its rejection reason.
type verifyCase struct {
	name  string
	build func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (p *droverv1.Plan, inflight []*droverv1.Allocation, want []string)
}

var verifyCases = []verifyCase{
	{"fits", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		f.warm(n)
		f.place(f.alloc(n, j, 1000, 1000))
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, nodeCPU-1000, nodeMemory-1000)})), nil, []string{""}
	}},
	{"cpu over", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		f.warm(n)
		f.place(f.alloc(n, j, 3000, 100))
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 1000, 100)})), nil, []string{"cpu"}
	}},
	{"memory over", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, nodeMemory+1)})), nil, []string{"memory"}
	}},
	{"static port held by desired-stop alloc still running", func(f *fixture, _ *droverv1.Job, _ *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		j, ev := f.job(staticHTTP)
		n := f.node(ready)
		old := f.place(f.alloc(n, j, 100, 100))[0]
		f.report(n.GetId(), running, old.GetId())
		f.stop(old.GetId())
		a := f.alloc(n, j, 100, 100)
		a.Resources.Ports[0].Value = port(old)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{a})), nil, []string{"already held by allocation " + old.GetId()}
	}},
	{"static port held by alloc this plan stops without losing it", func(f *fixture, _ *droverv1.Job, _ *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		j, ev := f.job(staticHTTP)
		n := f.node(ready)
		old := f.place(f.alloc(n, j, 100, 100))[0]
		f.report(n.GetId(), running, old.GetId())
		a := f.alloc(n, j, 100, 100)
		a.Resources.Ports[0].Value = port(old)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}, plainStop(old.GetId()))), nil, []string{"ports"}
	}},
	{"port of client-complete alloc is free", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		old := f.place(f.alloc(n, j, 100, 100))[0]
		f.report(n.GetId(), complete, old.GetId())
		a := f.alloc(n, j, 100, 100)
		a.Resources.Ports[0].Value = port(old)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{a})), nil, []string{""}
	}},
	{"static port reserved on the node", func(f *fixture, _ *droverv1.Job, _ *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		j, ev := f.job(staticHTTP)
		n := f.node(ready, func(n *droverv1.Node) { n.Reserved.Ports = []*droverv1.PortRange{{First: 22000, Last: 22010}} })
		a := f.alloc(n, j, 100, 100)
		a.Resources.Ports[0].Value = 22005
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{a})), nil, []string{"port 22005 is reserved on the node"}
	}},
	{"static port reserved on the node after an allocation took it", func(f *fixture, _ *droverv1.Job, _ *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		// What the node holds does not fit by itself: it takes nothing new,
		// even a placement that collides with nothing.
		j, ev := f.job(staticHTTP)
		n := f.node(ready)
		held := f.alloc(n, j, 100, 100)
		held.Resources.Ports[0].Value = 22005
		f.place(held)
		f.warm(n)
		f.reregister(n, func(n *droverv1.Node) { n.Reserved.Ports = []*droverv1.PortRange{{First: 22000, Last: 22010}} })
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})), nil, []string{"port 22005 is reserved on the node"}
	}},
	{"node shrank below what it holds", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		f.place(f.alloc(n, j, 3000, 100))
		f.warm(n)
		f.reregister(n, func(n *droverv1.Node) { n.Resources.CpuMhz = 2000 })
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 0, 100)})), nil, []string{"cpu"}
	}},
	{"in-flight allocation over a warm cache", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		f.place(f.alloc(n, j, 1000, 100))
		f.warm(n)
		inflight := []*droverv1.Allocation{f.alloc(n, j, 2000, 100)}
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 1000, 100)})), inflight, []string{"cpu"}
	}},
	{"address held on another node", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n, other := f.node(ready), f.node(ready)
		held := f.place(f.alloc(other, j, 100, 100))[0]
		a := f.alloc(n, j, 100, 100)
		a.Resources.Ip = held.GetResources().GetIp()
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{a})), nil, []string{"address " + a.Resources.Ip + " already held"}
	}},
	{"address of failed alloc is free", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n, other := f.node(ready), f.node(ready)
		held := f.place(f.alloc(other, j, 100, 100))[0]
		f.report(other.GetId(), failed, held.GetId())
		a := f.alloc(n, j, 100, 100)
		a.Resources.Ip = held.GetResources().GetIp()
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}))
		p.SnapshotIndex = f.st.Snapshot().Index() // made after the release
		return p, nil, []string{""}
	}},
	{"address twice in the plan", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n1, n2 := f.node(ready), f.node(ready)
		a1, a2 := f.alloc(n1, j, 100, 100), f.alloc(n2, j, 100, 100)
		a2.Resources.Ip = a1.Resources.Ip
		return newPlan(ev, nodePlan(n1, []*droverv1.Allocation{a1}), nodePlan(n2, []*droverv1.Allocation{a2})), nil,
			[]string{"", "already held by allocation " + a1.GetId()}
	}},
	{"address twice on one node", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		a1, a2 := f.alloc(n, j, 100, 100), f.alloc(n, j, 100, 100)
		a2.Resources.Ip = a1.Resources.Ip
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{a1, a2})), nil, []string{"address " + a1.Resources.Ip}
	}},
	{"update keeps its own address", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		old := f.place(f.alloc(n, j, 100, 100))[0]
		upd := old.CloneVT()
		upd.DesiredDescription = "updated in place"
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{upd, f.alloc(n, j, 100, 100)})), nil, []string{""}
	}},
	{"node missing", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := mock.Node()
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})), nil, []string{"node does not exist"}
	}},
	{"stops only on a missing node", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		return newPlan(ev, nodePlan(mock.Node(), nil, plainStop(mock.ID()))), nil, []string{""}
	}},
	{"node down refuses placements", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(down)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})), nil, []string{"node is down and contains invalid updates"}
	}},
	{"node down takes lost and unknown updates", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		olds := f.place(f.alloc(n, j, 100, 100), f.alloc(n, j, 100, 100))
		f.setStatus(n.GetId(), down)
		upd := []*droverv1.Allocation{withStatus(olds[0], lost), withStatus(olds[1], unknown)}
		return newPlan(ev, nodePlan(n, upd)), nil, []string{""}
	}},
	{"node disconnected refuses placements", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(disconnected)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})), nil, []string{"node is disconnected and contains invalid updates"}
	}},
	{"node disconnected refuses lost updates", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		old := f.place(f.alloc(n, j, 100, 100))[0]
		f.setStatus(n.GetId(), disconnected)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withStatus(old, lost)})), nil, []string{"node is disconnected"}
	}},
	{"node disconnected takes unknown updates", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		old := f.place(f.alloc(n, j, 100, 100))[0]
		f.setStatus(n.GetId(), disconnected)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withStatus(old, unknown)})), nil, []string{""}
	}},
	{"node initializing", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(initializing)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})), nil, []string{"node is not ready for placements"}
	}},
	{"node ineligible", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready, ineligible)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})), nil, []string{"node is not eligible"}
	}},
	{"node draining", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready, draining)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})), nil, []string{"node is not eligible"}
	}},
	{"in-place update on ineligible node", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready, ineligible)
		old := f.place(f.alloc(n, j, 100, 100))[0]
		upd := old.CloneVT()
		upd.DesiredDescription = "updated in place"
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{upd})), nil, []string{""}
	}},
	{"update and placement on ineligible node", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready, ineligible)
		old := f.place(f.alloc(n, j, 100, 100))[0]
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{old.CloneVT(), f.alloc(n, j, 100, 100)})), nil, []string{"node is not eligible"}
	}},
	{"lost stop frees capacity", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		old := f.place(f.alloc(n, j, 3000, 100))[0]
		f.report(n.GetId(), running, old.GetId())
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 3000, 100)}, lostStop(old.GetId()))), nil, []string{""}
	}},
	{"plain stop frees nothing", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		old := f.place(f.alloc(n, j, 3000, 100))[0]
		f.report(n.GetId(), running, old.GetId())
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 3000, 100)}, plainStop(old.GetId()))), nil, []string{"cpu"}
	}},
	{"allocation for another node", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n1, n2 := f.node(ready), f.node(ready)
		return newPlan(ev, nodePlan(n1, []*droverv1.Allocation{f.alloc(n2, j, 100, 100)})), nil, []string{"is for node " + n2.GetId()}
	}},
	{"in-flight allocation counts", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		inflight := []*droverv1.Allocation{f.alloc(n, j, 3000, 100)}
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 1000, 100)})), inflight, []string{"cpu"}
	}},
	{"in-flight allocation already in the snapshot counts once", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		placed := f.place(f.alloc(n, j, 3000, 100))
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, nodeCPU-3000, 100)})), placed, []string{""}
	}},
	{"in-flight address", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n, other := f.node(ready), f.node(ready)
		held := f.alloc(other, j, 100, 100)
		a := f.alloc(n, j, 100, 100)
		a.Resources.Ip = held.Resources.Ip
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{a})), []*droverv1.Allocation{held}, []string{"already held by allocation " + held.GetId()}
	}},
	{"earlier part of the plan for the same node counts", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n := f.node(ready)
		return newPlan(ev,
			nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 2000, 100)}),
			nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 2000, 100)})), nil, []string{"", "cpu"}
	}},
	{"rejected node does not count against later nodes", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation, []string) {
		n1, n2 := f.node(initializing), f.node(ready)
		a1, a2 := f.alloc(n1, j, 100, 100), f.alloc(n2, j, 100, 100)
		a2.Resources.Ip = a1.Resources.Ip
		return newPlan(ev, nodePlan(n1, []*droverv1.Allocation{a1}), nodePlan(n2, []*droverv1.Allocation{a2})), nil,
			[]string{"not ready", ""}
	}},
}

func TestVerifyPlan(t *testing.T) {
	for _, mode := range cacheModes {
		for _, tc := range verifyCases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				f := newFixture(t)
				j, ev := f.job()
				p, inflight, want := tc.build(f, j, ev)
				var ov *overlay
				if inflight != nil {
					ov = newOverlay()
					ov.add(inflight)
				}
				ver := verifyPlan(f.st.Snapshot(), p, ov, netip.Prefix{}, f.cache(mode.cached))
				checkVerification(t, p, ver, want)
			})
		}
	}
}

// checkVerification compares the verdict on each node plan with want.
func checkVerification(t *testing.T, p *droverv1.Plan, ver verification, want []string) {
	t.Helper()
	if len(want) != len(p.GetNodePlans()) {
		t.Fatalf("case wants %d verdicts for %d node plans", len(want), len(p.GetNodePlans()))
	}
	rejected := ver.rejected
	for i, np := range p.GetNodePlans() {
		accepted := slices.Contains(ver.accepted, np)
		switch {
		case want[i] == "" && !accepted:
			t.Errorf("node plan %d (node %s) rejected, want accepted; rejections %+v", i, np.GetNodeId(), ver.rejected)
		case want[i] != "" && accepted:
			t.Errorf("node plan %d (node %s) accepted, want rejected with %q", i, np.GetNodeId(), want[i])
		case want[i] != "":
			if len(rejected) == 0 || rejected[0].nodeID != np.GetNodeId() {
				t.Fatalf("node plan %d (node %s): no rejection in order; rejections %+v", i, np.GetNodeId(), ver.rejected)
			}
			if !strings.Contains(rejected[0].reason, want[i]) {
				t.Errorf("node plan %d rejected with %q, want it to contain %q", i, rejected[0].reason, want[i])
			}
			rejected = rejected[1:]
		}
	}
	if len(rejected) != 0 {
		t.Errorf("extra rejections %+v", rejected)
	}
}
