package scheduler

import (
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// TestExhausted fills small nodes and checks the placement failure of the
// first allocation that no longer fits.
func TestExhausted(t *testing.T) {
	cases := []struct {
		name      string
		resources *droverv1.Resources
		reserved  *droverv1.NodeReservedResources
		placed    int
		dimension string
	}{
		{"cpu", &droverv1.Resources{CpuMhz: 1500, MemoryMb: 100}, nil, 4, fit.DimensionCPU},
		{"cpu after reservation", &droverv1.Resources{CpuMhz: 1500, MemoryMb: 100}, &droverv1.NodeReservedResources{CpuMhz: 1500}, 2, fit.DimensionCPU},
		{"memory", &droverv1.Resources{CpuMhz: 100, MemoryMb: 3000}, nil, 4, fit.DimensionMemory},
		{"disk", &droverv1.Resources{CpuMhz: 100, MemoryMb: 100, DiskMb: 60000}, nil, 2, fit.DimensionDisk},
		{"ports", &droverv1.Resources{CpuMhz: 100, MemoryMb: 100, Ports: []*droverv1.Port{{Label: "http", Value: 80}}}, nil, 2, fit.DimensionPorts},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.addNodes(2, func(_ int, n *droverv1.Node) { n.Reserved = tc.reserved })
			j := testJob(10)
			j.TaskGroups[0].Resources = tc.resources
			job, ev := c.register(j)
			ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
			st := newStack(ec, job)
			placed := placeAll(ec, st, job, 10)
			if len(placed) != tc.placed {
				t.Fatalf("placed %d, want %d", len(placed), tc.placed)
			}
			f := st.failure(job.GetTaskGroups()[0])
			if f.GetNodesEvaluated() != 2 || f.GetNodesExhausted() != 2 || f.GetExhaustedBy()[tc.dimension] != 2 || len(f.GetExhaustedBy()) != 1 {
				t.Fatalf("failure = %v, want 2 nodes evaluated and exhausted by %s", f, tc.dimension)
			}
			if f.GetNodesAvailable()["dc-1"] != 2 {
				t.Fatalf("nodes available = %v, want dc-1: 2", f.GetNodesAvailable())
			}
		})
	}
}

// TestSampleBound checks that a selection ranks at most MaxCandidates
// feasible nodes that fit, walking past infeasible ones, and that
// successive selections start where the last one stopped.
func TestSampleBound(t *testing.T) {
	c := newCluster(t)
	c.addNodes(100, func(i int, n *droverv1.Node) {
		if i%2 == 1 {
			n.Datacenter = "dc-2"
		}
	})
	job, ev := c.register(testJob(3))
	cfg := fixedCfg()
	cfg.MaxCandidates = 5
	ec := newEvalContext(c.snapshot(), cfg, ev, job)
	st := newStack(ec, job)
	tg := job.GetTaskGroups()[0]
	total := 0
	for range 3 {
		rn := st.selectNode(tg, selectOptions{})
		if rn == nil {
			t.Fatal("nothing selected")
		}
		f := st.failure(tg)
		fits := f.GetNodesEvaluated() - f.GetNodesFiltered() - f.GetNodesExhausted()
		if fits != 5 || f.GetNodesFiltered() != f.GetFilteredBy()[reasonDatacenter] {
			t.Fatalf("failure = %v, want 5 ranked nodes, the rest filtered by datacenter", f)
		}
		total += int(f.GetNodesEvaluated())
	}
	if st.offset != total%100 {
		t.Fatalf("offset = %d, want %d: selections continue where the last stopped", st.offset, total%100)
	}
	cfg.MaxCandidates = 0
	ec = newEvalContext(c.snapshot(), cfg, ev, job)
	st = newStack(ec, job)
	st.selectNode(tg, selectOptions{})
	if f := st.failure(tg); f.GetNodesEvaluated()-f.GetNodesFiltered() != int32(min(DefaultMaxCandidates, 50)) {
		t.Fatalf("failure = %v, want %d ranked by default", f, min(DefaultMaxCandidates, 50))
	}
}

// TestSetNodes restricts candidates to one node and puts all back.
func TestSetNodes(t *testing.T) {
	c := newCluster(t)
	nodes := c.addNodes(5, nil)
	job, ev := c.register(testJob(3))
	ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
	st := newStack(ec, job)
	tg := job.GetTaskGroups()[0]
	st.setNodes([]*droverv1.Node{nodes[3]})
	for range 2 {
		rn := st.selectNode(tg, selectOptions{})
		if rn == nil || rn.node.GetId() != nodes[3].GetId() {
			t.Fatalf("selected %v, want the only candidate %s", rn, nodes[3].GetId())
		}
		ec.planPlace(runningAlloc(job, rn.node, rn.resources))
	}
	st.setNodes(nil)
	if len(st.candidates) != 5 {
		t.Fatalf("%d candidates after setNodes(nil), want 5", len(st.candidates))
	}
	if rn := st.selectNode(tg, selectOptions{}); rn == nil || rn.node.GetId() == nodes[3].GetId() {
		t.Fatalf("selected %v, want another node than the one holding two allocations", rn)
	}
}

// TestStoppedAllocsLeaveCounts checks that allocations the plan stops no
// longer count for anti-affinity, while their resources stay held.
func TestStoppedAllocsLeaveCounts(t *testing.T) {
	c := newCluster(t)
	nodes := c.addNodes(2, nil)
	job, ev := c.register(testJob(2))
	old := runningAlloc(job, nodes[0], nil)
	c.place(old)
	snap := c.snapshot()
	ec := newEvalContext(snap, fixedCfg(), ev, job)
	st := newStack(ec, job)
	tg := job.GetTaskGroups()[0]
	if rn := st.selectNode(tg, selectOptions{}); rn == nil || rn.node.GetId() != nodes[1].GetId() {
		t.Fatalf("selected %v, want the node without the job's allocation", rn)
	}
	ec.planStop(snap.AllocByID(old.GetId()), droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, "update",
		droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED, "")
	if got := ec.placements().onNode.get(ec.lookupNode(nodes[0]).index); got != 0 {
		t.Fatalf("job count on the stopped allocation's node = %d, want 0", got)
	}
	if rn := st.selectNode(tg, selectOptions{}); rn == nil || rn.node.GetId() != nodes[0].GetId() {
		t.Fatalf("selected %v, want the fuller node now that its allocation is stopping", rn)
	}
	if got := ec.usageOf(ec.lookupNode(nodes[0])).CPU; got != 1000 {
		t.Fatalf("usage = %d, want the stopping allocation's 1000 still held", got)
	}
}

// TestFailureKeepsFailedSelection checks that a group's failure reports
// its last selection that found nothing, even after a later one succeeded.
func TestFailureKeepsFailedSelection(t *testing.T) {
	c := newCluster(t)
	nodes := c.addNodes(3, nil)
	job, ev := c.register(testJob(2))
	ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
	st := newStack(ec, job)
	tg := job.GetTaskGroups()[0]
	// Pinned to a node that cannot take the group, then free to choose.
	st.setNodes([]*droverv1.Node{nodes[0]})
	big := tg.CloneVT()
	big.Resources.MemoryMb = 9000
	if rn := st.selectNode(big, selectOptions{}); rn != nil {
		t.Fatalf("selected %s for an ask larger than any node", rn.node.GetId())
	}
	st.setNodes(nil)
	if rn := st.selectNode(tg, selectOptions{}); rn == nil {
		t.Fatal("nothing selected")
	}
	f := st.failure(tg)
	if f.GetNodesEvaluated() != 1 || f.GetExhaustedBy()[fit.DimensionMemory] != 1 {
		t.Fatalf("failure = %v, want the failed selection: 1 node exhausted by memory", f)
	}
}
