package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// withAlternates names, in the plan, the alternates of an allocation of
// one of its node plans.
func withAlternates(p *droverv1.Plan, a *droverv1.Allocation, nodes ...*droverv1.Node) {
	alts := &droverv1.PlacementAlternates{}
	for _, n := range nodes {
		idx := slices.Index(p.AlternateNodes, n.GetId())
		if idx < 0 {
			idx = len(p.AlternateNodes)
			p.AlternateNodes = append(p.AlternateNodes, n.GetId())
		}
		alts.Nodes = append(alts.Nodes, uint32(idx))
	}
	for _, np := range p.GetNodePlans() {
		i := slices.Index(np.GetAllocations(), a)
		if i < 0 {
			continue
		}
		if np.Alternates == nil {
			for range np.GetAllocations() {
				np.Alternates = append(np.Alternates, &droverv1.PlacementAlternates{})
			}
		}
		np.Alternates[i] = alts
		return
	}
	panic("withAlternates: allocation not in the plan")
}

// full fills a node, leaving 100 MHz.
func full(f *fixture, n *droverv1.Node, j *droverv1.Job) {
	f.place(f.alloc(n, j, nodeCPU-100, 100))
}

// relocateCase builds state and a plan. where maps each planned
// allocation to the node it must be committed on, nil for dropped;
// rejected are the node ids the result must reject, with a part of each
// reason.
type relocateCase struct {
	name  string
	build func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (p *droverv1.Plan, where map[*droverv1.Allocation]*droverv1.Node, rejected map[string]string)
}

var relocateCases = []relocateCase{
	{"own node full: the first alternate that fits", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt1, alt2 := f.node(ready), f.node(ready), f.node(ready)
		full(f, n, j)
		full(f, alt1, j)
		a := f.alloc(n, j, 1000, 100)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}))
		withAlternates(p, a, alt1, alt2)
		return p, map[*droverv1.Allocation]*droverv1.Node{a: alt2}, nil
	}},
	{"what still fits stays on its node", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt := f.node(ready), f.node(ready)
		f.place(f.alloc(n, j, nodeCPU-1500, 100))
		a1, a2 := f.alloc(n, j, 1000, 100), f.alloc(n, j, 1000, 100)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a1, a2}))
		withAlternates(p, a1, alt)
		withAlternates(p, a2, alt)
		return p, map[*droverv1.Allocation]*droverv1.Node{a1: n, a2: alt}, nil
	}},
	{"no alternates: the node is dropped as before", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n := f.node(ready)
		full(f, n, j)
		a := f.alloc(n, j, 1000, 100)
		return newPlan(ev, nodePlan(n, []*droverv1.Allocation{a})), map[*droverv1.Allocation]*droverv1.Node{a: nil}, map[string]string{n.GetId(): "cpu"}
	}},
	{"a node plan that also stops is not split", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt := f.node(ready), f.node(ready)
		old := f.place(f.alloc(n, j, nodeCPU-100, 100))[0]
		a := f.alloc(n, j, 1000, 100)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}, plainStop(old.GetId())))
		withAlternates(p, a, alt)
		return p, map[*droverv1.Allocation]*droverv1.Node{a: nil}, map[string]string{n.GetId(): "cpu"}
	}},
	{"alternates that take no work are passed over", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, downed, drained, alt := f.node(ready), f.node(down), f.node(ready, draining), f.node(ready)
		full(f, n, j)
		a := f.alloc(n, j, 1000, 100)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}))
		withAlternates(p, a, downed, drained, alt)
		return p, map[*droverv1.Allocation]*droverv1.Node{a: alt}, nil
	}},
	{"an alternate holding the static port is passed over", func(f *fixture, _ *droverv1.Job, _ *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		j, ev := f.job(staticHTTP)
		n, taken, alt := f.node(ready), f.node(ready), f.node(ready)
		full(f, n, j)
		holder := f.alloc(taken, j, 100, 100)
		holder.Resources.Ports[0].Value = 21999
		f.place(holder)
		a := f.alloc(n, j, 1000, 100)
		a.Resources.Ports[0].Value = 21999
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}))
		withAlternates(p, a, taken, alt)
		return p, map[*droverv1.Allocation]*droverv1.Node{a: alt}, nil
	}},
	{"never the room the plan's own node plans counted on", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt := f.node(ready), f.node(ready)
		full(f, n, j)
		f.place(f.alloc(alt, j, nodeCPU-1100, 100)) // room for one of 1,000 MHz
		a := f.alloc(n, j, 1000, 100)
		b := f.alloc(alt, j, 1000, 100)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}), nodePlan(alt, []*droverv1.Allocation{b}))
		withAlternates(p, a, alt)
		return p, map[*droverv1.Allocation]*droverv1.Node{a: nil, b: alt}, map[string]string{n.GetId(): "cpu"}
	}},
	{"a relocated placement joins the node's accepted part", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt := f.node(ready), f.node(ready)
		full(f, n, j)
		a := f.alloc(n, j, 1000, 100)
		b := f.alloc(alt, j, 1000, 100)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}), nodePlan(alt, []*droverv1.Allocation{b}))
		withAlternates(p, a, alt)
		return p, map[*droverv1.Allocation]*droverv1.Node{a: alt, b: alt}, nil
	}},
	{"every alternate full: dropped, saying how many were kept", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt := f.node(ready), f.node(ready)
		f.place(f.alloc(n, j, nodeCPU-1500, 100))
		full(f, alt, j)
		a1, a2 := f.alloc(n, j, 1000, 100), f.alloc(n, j, 1000, 100)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a1, a2}))
		withAlternates(p, a1, alt)
		withAlternates(p, a2, alt)
		return p, map[*droverv1.Allocation]*droverv1.Node{a1: n, a2: nil}, map[string]string{n.GetId(): "1 of 2 placements kept"}
	}},
	{"an alternate's room counts the plan in flight", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt, alt2 := f.node(ready), f.node(ready), f.node(ready)
		full(f, n, j)
		f.place(f.alloc(alt, j, nodeCPU-1500, 1)) // room for one of 1,000 MHz
		f.flying = append(f.flying, f.alloc(alt, j, 1000, 1))
		a := f.alloc(n, j, 1000, 1)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}))
		withAlternates(p, a, alt, alt2)
		return p, map[*droverv1.Allocation]*droverv1.Node{a: alt2}, nil
	}},
	{"an alternate's stored allocation shrunk in flight", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt, alt2 := f.node(ready), f.node(ready), f.node(ready)
		full(f, n, j)
		f.place(f.alloc(alt, j, nodeCPU-2900, 1))
		stored := f.place(f.alloc(alt, j, 2000, 1))[0] // 900 MHz left
		shrunk := stored.CloneVT()
		shrunk.Resources.CpuMhz = 500 // 2,400 left: counted twice, 400
		f.flying = append(f.flying, shrunk)
		a := f.alloc(n, j, 1000, 1)
		p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{a}))
		withAlternates(p, a, alt, alt2)
		return p, map[*droverv1.Allocation]*droverv1.Node{a: alt}, nil
	}},
	{"many onto one node: exactly what fits, past the room's layer bound", func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, map[*droverv1.Allocation]*droverv1.Node, map[string]string) {
		n, alt := f.node(ready), f.node(ready)
		f.place(f.alloc(n, j, nodeCPU, 1))
		f.place(f.alloc(alt, j, nodeCPU-2*maxRoomLayers*100, 1)) // room for 2*maxRoomLayers of 100 MHz
		var planned []*droverv1.Allocation
		where := make(map[*droverv1.Allocation]*droverv1.Node)
		for i := range 3 * maxRoomLayers {
			a := f.alloc(n, j, 100, 1)
			planned = append(planned, a)
			where[a] = nil
			if i < 2*maxRoomLayers {
				where[a] = alt
			}
		}
		p := newPlan(ev, nodePlan(n, planned))
		for _, a := range planned {
			withAlternates(p, a, alt)
		}
		return p, where, map[string]string{n.GetId(): fmt.Sprintf("%d of %d placements kept", 2*maxRoomLayers, 3*maxRoomLayers)}
	}},
}

// TestVerifyPlanRelocates runs each case counting candidate nodes from
// scratch and from a usage cache.
func TestVerifyPlanRelocates(t *testing.T) {
	for _, tc := range relocateCases {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cached=%v", tc.name, cached), func(t *testing.T) {
				testRelocate(t, tc, cached)
			})
		}
	}
}

func testRelocate(t *testing.T, tc relocateCase, cached bool) {
	f := newFixture(t)
	j, ev := f.job()
	p, where, rejected := tc.build(f, j, ev)
	var inflight *overlay
	if len(f.flying) > 0 {
		inflight = newOverlay()
		inflight.add(f.flying)
	}
	var usage *scheduler.UsageCache
	if cached {
		usage = scheduler.NewUsageCache()
	}
	ver := verifyPlan(f.st.Snapshot(), p, inflight, netip.Prefix{}, usage)
	committed := make(map[string]*droverv1.Allocation)
	perNode := make(map[string]int)
	for _, np := range ver.accepted {
		perNode[np.GetNodeId()]++
		for _, a := range np.GetAllocations() {
			if a.GetNodeId() != np.GetNodeId() {
				t.Errorf("allocation %s in the node plan of %s names node %s", a.GetId(), np.GetNodeId(), a.GetNodeId())
			}
			committed[a.GetId()] = a
		}
	}
	for node, n := range perNode {
		if n > 1 {
			t.Errorf("%d accepted node plans for node %s, want one", n, node)
		}
	}
	moved := 0
	for a, want := range where {
		got := committed[a.GetId()]
		switch {
		case want == nil && got != nil:
			t.Errorf("allocation %s committed on %s, want it dropped", a.GetId(), got.GetNodeId())
		case want != nil && got == nil:
			t.Errorf("allocation %s dropped, want it on %s; rejections %+v", a.GetId(), want.GetId(), ver.rejected)
		case want != nil && got.GetNodeId() != want.GetId():
			t.Errorf("allocation %s on %s, want %s", a.GetId(), got.GetNodeId(), want.GetId())
		}
		if want != nil && want.GetId() != a.GetNodeId() {
			moved++
		}
	}
	if ver.relocated != moved {
		t.Errorf("relocated %d, want %d", ver.relocated, moved)
	}
	if len(ver.rejected) != len(rejected) {
		t.Fatalf("rejections %+v, want %v", ver.rejected, rejected)
	}
	for _, r := range ver.rejected {
		if want, ok := rejected[r.nodeID]; !ok || !strings.Contains(r.reason, want) {
			t.Errorf("rejection of %s: %q, want it to contain %q", r.nodeID, r.reason, want)
		}
	}
}
