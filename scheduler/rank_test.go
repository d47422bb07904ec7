package scheduler

import (
	"math"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

func TestBinPackScore(t *testing.T) {
	node := &droverv1.Node{Resources: &droverv1.NodeResources{CpuMhz: 1000, MemoryMb: 1000}}
	cases := []struct {
		name     string
		held     int64
		ask      int64
		want     float64
		tolerant float64
	}{
		{"empty node, nothing asked", 0, 0, 0, 0},
		{"full after the ask", 500, 500, 1, 0},
		{"half full", 0, 500, (20 - 2*math.Sqrt(10)) / 18, 1e-9},
		{"over capacity is full", 900, 500, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := fit.NewUsage(node)
			u.Add(&droverv1.Allocation{Resources: &droverv1.AllocatedResources{CpuMhz: tc.held, MemoryMb: tc.held}})
			got := binPackScore(u, &droverv1.Resources{CpuMhz: tc.ask, MemoryMb: tc.ask})
			if math.Abs(got-tc.want) > tc.tolerant {
				t.Fatalf("score = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScoreComponents(t *testing.T) {
	if got := antiAffinityScore(1, 4); got != -0.5 {
		t.Fatalf("anti-affinity of 1 collision in 4 = %v, want -0.5", got)
	}
	if got := antiAffinityScore(10, 2); got != -1 {
		t.Fatalf("anti-affinity is bounded: %v, want -1", got)
	}
	var m scoreMean
	if m.value() != 0 {
		t.Fatalf("empty mean = %v", m.value())
	}
	m.add(1)
	m.add(-0.5)
	if m.value() != 0.25 {
		t.Fatalf("mean = %v, want 0.25", m.value())
	}
}

// TestRanking places on small clusters where one node should win.
func TestRanking(t *testing.T) {
	t.Run("bin packing prefers the fuller node", func(t *testing.T) {
		c := newCluster(t)
		nodes := c.addNodes(3, nil)
		other, _ := c.register(testJob(1))
		c.place(runningAlloc(other, nodes[1], &droverv1.AllocatedResources{CpuMhz: 2000, MemoryMb: 2000}))
		job, ev := c.register(testJob(1))
		ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
		placed := placeAll(ec, newStack(ec, job), job, 1)
		if len(placed) != 1 || placed[0].GetNodeId() != nodes[1].GetId() {
			t.Fatalf("placed on %v, want the fuller node %s", perNode(placed), nodes[1].GetId())
		}
		if s := placed[0].GetScore(); s <= 0 || s > 1 {
			t.Fatalf("score = %v, want within (0, 1]", s)
		}
	})
	t.Run("anti-affinity spreads one job's allocations", func(t *testing.T) {
		c := newCluster(t)
		c.addNodes(3, nil)
		job, ev := c.register(testJob(3))
		ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
		placed := placeAll(ec, newStack(ec, job), job, 3)
		if got := perNode(placed); len(got) != 3 {
			t.Fatalf("placements per node = %v, want one on each of 3 nodes", got)
		}
	})
	t.Run("anti-affinity counts existing allocations", func(t *testing.T) {
		c := newCluster(t)
		nodes := c.addNodes(2, nil)
		job, ev := c.register(testJob(2))
		c.place(runningAlloc(job, nodes[0], nil))
		ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
		placed := placeAll(ec, newStack(ec, job), job, 1)
		if len(placed) != 1 || placed[0].GetNodeId() != nodes[1].GetId() {
			t.Fatalf("placed on %v, want the node without the job, %s", perNode(placed), nodes[1].GetId())
		}
	})
	t.Run("penalty node ranks lower", func(t *testing.T) {
		c := newCluster(t)
		nodes := c.addNodes(2, nil)
		other, _ := c.register(testJob(1))
		c.place(runningAlloc(other, nodes[0], &droverv1.AllocatedResources{CpuMhz: 2000, MemoryMb: 2000}))
		job, ev := c.register(testJob(1))
		ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
		st := newStack(ec, job)
		rn := st.selectNode(job.GetTaskGroups()[0], selectOptions{penaltyNodes: map[string]struct{}{nodes[0].GetId(): {}}})
		if rn == nil || rn.node.GetId() != nodes[1].GetId() {
			t.Fatalf("selected %v, want %s rather than the penalised fuller node", rn, nodes[1].GetId())
		}
	})
}
