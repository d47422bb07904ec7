package scheduler

import (
	"fmt"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestRankedList(t *testing.T) {
	nodes := make([]*droverv1.Node, 6)
	for i := range nodes {
		nodes[i] = &droverv1.Node{Id: fmt.Sprintf("n%d", i)}
	}
	tests := []struct {
		name   string
		keep   int
		scores []float64 // of nodes[0], nodes[1], ... in the order added
		chosen int
		want   []string
	}{
		{"keeps none", 0, []float64{1, 2, 3}, 2, nil},
		{"keeping one is only the chosen", 1, []float64{1, 2, 3}, 2, nil},
		{"best first, chosen left out", 3, []float64{0.1, 0.9, 0.5, 0.7}, 1, []string{"n3", "n2"}},
		{"equal scores keep their order", 4, []float64{0.5, 0.5, 0.5}, 0, []string{"n1", "n2"}},
		{"lower than all kept is dropped", 2, []float64{0.9, 0.8, 0.1}, 0, []string{"n1"}},
		{"a later better one pushes out the last", 3, []float64{0.2, 0.3, 0.1, 0.9, 0.4}, 3, []string{"n4", "n1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l rankedList
			l.reset(tt.keep)
			for i, s := range tt.scores {
				l.add(nodes[i], s)
			}
			var got []string
			for _, n := range l.others(nodes[tt.chosen]) {
				got = append(got, n.GetId())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("others = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPlacementAlternates runs one evaluation with alternates and one
// without, from the same state and seed: the placements are the same, and
// with them every placement names up to PlacementAlternates other nodes
// that are ready, in the job's datacenter and not its own. Groups whose
// placement depends on the node chosen (spread, distinct_hosts) name none.
func TestPlacementAlternates(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*droverv1.Job)
		names bool
	}{
		{"bin packing", func(*droverv1.Job) {}, true},
		{"spread", func(j *droverv1.Job) {
			j.TaskGroups[0].Spreads = []*droverv1.Spread{{Attribute: "rack", Weight: 100}}
		}, false},
		{"distinct_hosts", func(j *droverv1.Job) {
			j.Constraints = append(j.Constraints, &droverv1.Constraint{Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plans := make([]*droverv1.Plan, 2)
			for i, alternates := range []int{0, 3} {
				h := newHarness(t)
				h.addNodes(20, func(i int, n *droverv1.Node) {
					n.Id = fmt.Sprintf("00000000-0000-4000-8000-%012d", i) // the same nodes in both runs
					n.Attributes["rack"] = fmt.Sprintf("r%d", i%4)
					if i%5 == 4 {
						n.Status = droverv1.NodeStatus_NODE_STATUS_INITIALIZING
					}
				})
				h.cfg.PlacementAlternates = alternates
				j := typedJob(droverv1.JobType_JOB_TYPE_SERVICE, 12)
				j.Id = "alternates"
				tt.edit(j)
				j.Canonicalize()
				h.runJob(j)
				if len(h.planner.plans) != 1 {
					t.Fatalf("%d plans, want 1", len(h.planner.plans))
				}
				plans[i] = h.planner.plans[0]
				checkAlternates(t, h, plans[i], alternates, tt.names)
			}
			if a, b := placedNames(plans[0]), placedNames(plans[1]); !slices.Equal(a, b) {
				t.Errorf("placements differ with alternates:\nwithout %v\nwith    %v", a, b)
			}
		})
	}
}

// placedNames lists "allocation name@node id" of a plan's placements.
func placedNames(p *droverv1.Plan) []string {
	var out []string
	for _, np := range p.GetNodePlans() {
		for _, a := range np.GetAllocations() {
			out = append(out, a.GetName()+"@"+a.GetNodeId())
		}
	}
	slices.Sort(out)
	return out
}

func checkAlternates(t *testing.T, h *harness, p *droverv1.Plan, want int, names bool) {
	t.Helper()
	snap := h.snapshot()
	placements := 0
	for _, np := range p.GetNodePlans() {
		if n := len(np.GetAlternates()); n != 0 && n != len(np.GetAllocations()) {
			t.Fatalf("node plan %s: %d alternates for %d allocations", np.GetNodeId(), n, len(np.GetAllocations()))
		}
		for i, a := range np.GetAllocations() {
			placements++
			var alts []uint32
			if len(np.GetAlternates()) > 0 {
				alts = np.GetAlternates()[i].GetNodes()
			}
			if want == 0 || !names {
				if len(alts) > 0 {
					t.Errorf("allocation %s names %d alternates, want none", a.GetName(), len(alts))
				}
				continue
			}
			if len(alts) == 0 || len(alts) > want {
				t.Errorf("allocation %s names %d alternates, want 1 to %d", a.GetName(), len(alts), want)
			}
			seen := map[string]bool{a.GetNodeId(): true}
			for _, i := range alts {
				if int(i) >= len(p.GetAlternateNodes()) {
					t.Fatalf("allocation %s: alternate index %d of %d nodes", a.GetName(), i, len(p.GetAlternateNodes()))
				}
				id := p.GetAlternateNodes()[i]
				n := snap.NodeByID(id)
				switch {
				case seen[id]:
					t.Errorf("allocation %s names node %s twice or its own", a.GetName(), id)
				case n == nil || n.GetStatus() != droverv1.NodeStatus_NODE_STATUS_READY:
					t.Errorf("allocation %s names node %s, which takes no placements", a.GetName(), id)
				}
				seen[id] = true
			}
		}
	}
	if placements == 0 {
		t.Fatal("nothing placed")
	}
}
