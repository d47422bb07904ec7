package plan

import (
	"net/netip"
	"strings"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// portOf returns the value of the allocation's "http" port.
func portOf(a *droverv1.Allocation) int32 { return a.GetResources().GetPorts()[0].GetValue() }

// withHTTP returns a copy of a whose "http" port is value.
func withHTTP(a *droverv1.Allocation, value int32) *droverv1.Allocation {
	c := a.CloneVT()
	c.Resources.Ports[0].Value = value
	return c
}

// TestVerifyPlanReplacesTakenDynamicPorts: a new placement's dynamic port
// that another allocation took meanwhile is given a free port of the node's
// range instead of costing the plan the node; a port that is not the
// applier's to change (static, or of an allocation that exists) still
// rejects the node.
func TestVerifyPlanReplacesTakenDynamicPorts(t *testing.T) {
	const taken = 25000
	tests := []struct {
		name string
		// build returns the plan (its first node plan is checked), the
		// allocations in flight, and the ports the checked node plan's
		// allocations must not hold once accepted.
		build func(f *fixture) (p *droverv1.Plan, inflight []*droverv1.Allocation, avoid []int32)
		// wantReplaced is how many ports must get another number; reject,
		// when set, is the reason the node must be rejected with instead.
		wantReplaced int
		reject       string
	}{
		{"held by a running allocation", func(f *fixture) (*droverv1.Plan, []*droverv1.Allocation, []int32) {
			j, ev := f.job()
			n := f.node(ready)
			f.report(n.GetId(), running, f.place(withHTTP(f.alloc(n, j, 10, 10), taken))[0].GetId())
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withHTTP(f.alloc(n, j, 10, 10), taken)})), nil, []int32{taken}
		}, 1, ""},
		{"held by a plan in flight", func(f *fixture) (*droverv1.Plan, []*droverv1.Allocation, []int32) {
			j, ev := f.job()
			n := f.node(ready)
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withHTTP(f.alloc(n, j, 10, 10), taken)})),
				[]*droverv1.Allocation{withHTTP(f.alloc(n, j, 10, 10), taken)}, []int32{taken}
		}, 1, ""},
		{"twice in the node plan", func(f *fixture) (*droverv1.Plan, []*droverv1.Allocation, []int32) {
			j, ev := f.job()
			n := f.node(ready)
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withHTTP(f.alloc(n, j, 10, 10), taken), withHTTP(f.alloc(n, j, 10, 10), taken)})), nil, nil
		}, 1, ""},
		{"reserved on the node", func(f *fixture) (*droverv1.Plan, []*droverv1.Allocation, []int32) {
			j, ev := f.job()
			n := f.node(ready, func(n *droverv1.Node) { n.Reserved.Ports = []*droverv1.PortRange{{First: taken, Last: taken + 5}} })
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withHTTP(f.alloc(n, j, 10, 10), taken+2)})), nil, []int32{taken, taken + 1, taken + 2, taken + 3, taken + 4, taken + 5}
		}, 1, ""},
		{"a static port of a later placement", func(f *fixture) (*droverv1.Plan, []*droverv1.Allocation, []int32) {
			j, ev := f.job()
			js, _ := f.job(func(j *droverv1.Job) { j.TaskGroups[0].Resources.Ports[0].Value = taken })
			n := f.node(ready)
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withHTTP(f.alloc(n, j, 10, 10), taken), withHTTP(f.alloc(n, js, 10, 10), taken)})), nil, nil
		}, 1, ""},
		{"static port held", func(f *fixture) (*droverv1.Plan, []*droverv1.Allocation, []int32) {
			j, ev := f.job(staticHTTP)
			n := f.node(ready)
			f.place(withHTTP(f.alloc(n, j, 10, 10), 21999))
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withHTTP(f.alloc(n, j, 10, 10), 21999)})), nil, nil
		}, 0, "already held by allocation"},
		{"no free port in the range", func(f *fixture) (*droverv1.Plan, []*droverv1.Allocation, []int32) {
			j, ev := f.job()
			n := f.node(ready, func(n *droverv1.Node) { n.Resources.MinDynamicPort, n.Resources.MaxDynamicPort = taken, taken })
			f.place(withHTTP(f.alloc(n, j, 10, 10), taken))
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{withHTTP(f.alloc(n, j, 10, 10), taken)})), nil, nil
		}, 0, "already held by allocation"},
	}
	for _, mode := range cacheModes {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				f := newFixture(t)
				p, inflight, avoid := tt.build(f)
				var ov *overlay
				if inflight != nil {
					ov = newOverlay()
					ov.add(inflight)
				}
				var submitted []int32
				for _, a := range p.GetNodePlans()[0].GetAllocations() {
					submitted = append(submitted, portOf(a))
				}
				ver := verifyPlan(f.st.Snapshot(), p, ov, netip.Prefix{}, f.cache(mode.cached))
				for i, a := range p.GetNodePlans()[0].GetAllocations() {
					if portOf(a) != submitted[i] {
						t.Errorf("submitted allocation %s changed from port %d to %d: the applier must work on copies", a.GetId(), submitted[i], portOf(a))
					}
				}
				if tt.reject != "" {
					if len(ver.rejected) != 1 || !strings.Contains(ver.rejected[0].reason, tt.reject) {
						t.Fatalf("rejections %+v, want the node rejected with %q", ver.rejected, tt.reject)
					}
					return
				}
				if len(ver.rejected) != 0 || len(ver.accepted) != 1 {
					t.Fatalf("rejections %+v, %d node plans accepted; want the node accepted", ver.rejected, len(ver.accepted))
				}
				if ver.portsReplaced != tt.wantReplaced {
					t.Errorf("%d ports replaced, want %d", ver.portsReplaced, tt.wantReplaced)
				}
				node := f.st.Snapshot().NodeByID(p.GetNodePlans()[0].GetNodeId())
				first, last := fit.DynamicPortRange(node)
				seen := map[int32]bool{}
				for _, a := range ver.accepted[0].GetAllocations() {
					port := portOf(a)
					for _, bad := range avoid {
						if port == bad {
							t.Errorf("allocation %s kept port %d, which is taken", a.GetId(), port)
						}
					}
					if seen[port] {
						t.Errorf("port %d given twice in the node plan", port)
					}
					seen[port] = true
					if port < first || port > last {
						t.Errorf("allocation %s got port %d, outside the node's dynamic range %d-%d", a.GetId(), port, first, last)
					}
				}
			})
		}
	}
}
