package scheduler

import (
	"fmt"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// rackCounts counts placements per rack attribute of their node.
func rackCounts(t *testing.T, st State, allocs []*droverv1.Allocation) map[string]int {
	t.Helper()
	out := make(map[string]int)
	for _, a := range allocs {
		out[st.NodeByID(a.GetNodeId()).GetAttributes()["rack"]]++
	}
	return out
}

func TestSpreadTargets(t *testing.T) {
	cases := []struct {
		name    string
		nodes   int
		racks   []string
		targets []*droverv1.SpreadTarget
		// want counts placements per rack, or per bucket of racks that
		// share the implicit target.
		want   map[string]int
		bucket map[string]string
	}{
		{"70/30 over two racks", 40, []string{"r1", "r2"},
			[]*droverv1.SpreadTarget{{Value: "r1", Percent: 70}, {Value: "r2", Percent: 30}},
			map[string]int{"r1": 70, "r2": 30}, nil},
		{"implicit remainder shared by the other racks", 60, []string{"r1", "r2", "r3"},
			[]*droverv1.SpreadTarget{{Value: "r1", Percent: 50}},
			map[string]int{"r1": 50, "others": 50}, map[string]string{"r2": "others", "r3": "others"}},
		{"uneven rack sizes", 50, []string{"r1", "r2", "r2", "r2", "r2"},
			[]*droverv1.SpreadTarget{{Value: "r1", Percent: 50}, {Value: "r2", Percent: 50}},
			map[string]int{"r1": 50, "r2": 50}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.addNodes(tc.nodes, func(i int, n *droverv1.Node) {
				n.Attributes["rack"] = tc.racks[i%len(tc.racks)]
				n.Resources.CpuMhz, n.Resources.MemoryMb = 16000, 16000
			})
			j := testJob(100)
			j.TaskGroups[0].Spreads = []*droverv1.Spread{{Attribute: "rack", Weight: 100, Targets: tc.targets}}
			job, ev := c.register(j)
			snap := c.snapshot()
			ec := newEvalContext(snap, fixedCfg(), ev, job)
			placed := placeAll(ec, newStack(ec, job), job, 100)
			if len(placed) != 100 {
				t.Fatalf("placed %d, want 100", len(placed))
			}
			got := make(map[string]int)
			for rack, n := range rackCounts(t, snap, placed) {
				if b, ok := tc.bucket[rack]; ok {
					rack = b
				}
				got[rack] += n
			}
			for rack, want := range tc.want {
				if d := got[rack] - want; d < -1 || d > 1 {
					t.Fatalf("placements per rack = %v, want %v within 1", got, tc.want)
				}
			}
		})
	}
}

// TestSpreadTargetsCountExisting checks that allocations already running
// count toward the targets: with 40 of 50 wanted in r1 already there, the
// next 50 go mostly to r2.
func TestSpreadTargetsCountExisting(t *testing.T) {
	c := newCluster(t)
	nodes := c.addNodes(20, func(i int, n *droverv1.Node) {
		n.Attributes["rack"] = []string{"r1", "r2"}[i%2]
		n.Resources.CpuMhz, n.Resources.MemoryMb = 100000, 100000
	})
	j := testJob(100)
	j.TaskGroups[0].Spreads = []*droverv1.Spread{{Attribute: "rack", Weight: 100, Targets: []*droverv1.SpreadTarget{
		{Value: "r1", Percent: 50}, {Value: "r2", Percent: 50},
	}}}
	job, ev := c.register(j)
	var existing []*droverv1.Allocation
	for i := range 40 {
		existing = append(existing, runningAlloc(job, nodes[2*(i%10)], nil))
	}
	c.place(existing...)
	snap := c.snapshot()
	ec := newEvalContext(snap, fixedCfg(), ev, job)
	placed := placeAll(ec, newStack(ec, job), job, 60)
	got := rackCounts(t, snap, placed)
	if d := got["r2"] - 50; d < -1 || d > 1 {
		t.Fatalf("new placements per rack = %v, want 10 in r1 and 50 in r2 within 1", got)
	}
}

// TestSpreadEven spreads 100 allocations over 25 racks of 4 nodes each.
func TestSpreadEven(t *testing.T) {
	c := newCluster(t)
	c.addNodes(100, func(i int, n *droverv1.Node) {
		n.Attributes["rack"] = fmt.Sprintf("r%d", i%25)
		n.Resources.CpuMhz, n.Resources.MemoryMb = 16000, 16000
	})
	j := testJob(100)
	j.TaskGroups[0].Spreads = []*droverv1.Spread{{Attribute: "rack", Weight: 50}}
	job, ev := c.register(j)
	snap := c.snapshot()
	ec := newEvalContext(snap, fixedCfg(), ev, job)
	placed := placeAll(ec, newStack(ec, job), job, 100)
	if len(placed) != 100 {
		t.Fatalf("placed %d, want 100", len(placed))
	}
	got := rackCounts(t, snap, placed)
	if len(got) != 25 {
		t.Fatalf("placements per rack = %v, want all 25 racks used", got)
	}
	for rack, n := range got {
		if n < 3 || n > 5 {
			t.Fatalf("rack %s has %d placements (%v), want 4 within 1", rack, n, got)
		}
	}
}

func TestSpreadBoost(t *testing.T) {
	node := func(rack string) *droverv1.Node {
		if rack == "" {
			return &droverv1.Node{}
		}
		return &droverv1.Node{Attributes: map[string]string{"rack": rack}}
	}
	t.Run("targets", func(t *testing.T) {
		s := newSpreadCounts(&droverv1.Spread{Attribute: "rack", Targets: []*droverv1.SpreadTarget{{Value: "a", Percent: 80}}}, 10, 1)
		for range 3 {
			s.add(node("a"), 1)
		}
		s.add(node("b"), 1)
		s.add(node("c"), 1)
		cases := []struct {
			rack string
			want float64
		}{
			{"a", (8.0 - 4) / 8},
			// b and c share the remaining 2, and already hold 2.
			{"b", -0.5},
			{"", -1},
		}
		for _, tc := range cases {
			if got := s.boost(node(tc.rack)); got != tc.want {
				t.Fatalf("boost(%q) = %v, want %v", tc.rack, got, tc.want)
			}
		}
		// Once the feasible values are known, boosts stretch over -1..1.
		s.see(node("a"))
		s.see(node("b"))
		s.prepare()
		if a, b := s.boost(node("a")), s.boost(node("b")); a != 1 || b != -1 {
			t.Fatalf("stretched boosts a=%v b=%v, want 1 and -1", a, b)
		}
	})
	t.Run("even", func(t *testing.T) {
		s := newSpreadCounts(&droverv1.Spread{Attribute: "rack"}, 10, 1)
		s.see(node("a"))
		s.see(node("b"))
		s.prepare()
		if got := s.boost(node("a")); got != 0 {
			t.Fatalf("boost before any placement = %v, want 0", got)
		}
		s.add(node("a"), 1)
		s.prepare()
		if a, b := s.boost(node("a")), s.boost(node("b")); a != -1 || b != 1 {
			t.Fatalf("boosts a=%v b=%v, want -1 for the used value and 1 for the unused one", a, b)
		}
		s.add(node("b"), 1)
		s.add(node("b"), 1)
		s.add(node("a"), 1)
		s.add(node("a"), 1)
		s.add(node("c"), 1)
		s.prepare()
		// a=3 b=2 c=1
		if a, c := s.boost(node("a")), s.boost(node("c")); a != -1 || c != 1 {
			t.Fatalf("boosts a=%v c=%v, want -1 for the most used and 1 for the least", a, c)
		}
		if got := s.boost(node("")); got != -1 {
			t.Fatalf("boost without the attribute = %v, want -1", got)
		}
	})
}

// TestSpreadMissingAttribute checks that nodes without the attribute are
// used only when nothing else is left.
func TestSpreadMissingAttribute(t *testing.T) {
	c := newCluster(t)
	nodes := c.addNodes(2, func(i int, n *droverv1.Node) {
		if i == 0 {
			delete(n.Attributes, "rack")
		}
	})
	j := testJob(2)
	j.TaskGroups[0].Spreads = []*droverv1.Spread{{Attribute: "rack", Weight: 100, Targets: []*droverv1.SpreadTarget{{Value: "r1", Percent: 100}}}}
	job, ev := c.register(j)
	ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
	placed := placeAll(ec, newStack(ec, job), job, 1)
	if len(placed) != 1 || placed[0].GetNodeId() != nodes[1].GetId() {
		t.Fatalf("placed on %v, want the node with the attribute %s", perNode(placed), nodes[1].GetId())
	}
}

// TestSpreadSampleSize checks the bound on candidates for spread groups.
func TestSpreadSampleSize(t *testing.T) {
	cases := []struct {
		name   string
		racks  int
		max    int
		spread bool
		want   int
	}{
		{"no spread", 50, 4, false, 4},
		{"few values", 2, 4, true, 4},
		{"twice the values", 10, 4, true, 20},
		{"capped", 50, 4, true, 32},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.addNodes(100, func(i int, n *droverv1.Node) { n.Attributes["rack"] = fmt.Sprintf("r%d", i%tc.racks) })
			j := testJob(10)
			if tc.spread {
				j.TaskGroups[0].Spreads = []*droverv1.Spread{{Attribute: "rack", Weight: 50}}
			}
			job, ev := c.register(j)
			cfg := fixedCfg()
			cfg.MaxCandidates = tc.max
			ec := newEvalContext(c.snapshot(), cfg, ev, job)
			st := newStack(ec, job)
			if rn := st.selectNode(job.GetTaskGroups()[0], selectOptions{}); rn == nil {
				t.Fatal("nothing selected")
			}
			if got := st.failure(job.GetTaskGroups()[0]).GetNodesEvaluated(); int(got) != tc.want {
				t.Fatalf("evaluated %d nodes, want %d", got, tc.want)
			}
		})
	}
}
