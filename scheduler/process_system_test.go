package scheduler

import (
	"maps"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// TestProcessSystem places a system job: one allocation on every node that
// is ready, eligible, in the job's datacenters and satisfies its
// constraints; a node that fails only for lack of room is owed one.
func TestProcessSystem(t *testing.T) {
	cases := []struct {
		name       string
		edit       func(i int, n *droverv1.Node)
		down       []int // made down after registering
		constraint *droverv1.Constraint
		want       []int // nodes that get an allocation
		exhausted  string
	}{
		{name: "every ready eligible node", want: []int{0, 1, 2, 3, 4, 5}},
		{name: "node states", down: []int{5}, want: []int{0},
			edit: func(i int, n *droverv1.Node) {
				switch i {
				case 1:
					n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
				case 2:
					n.Status = droverv1.NodeStatus_NODE_STATUS_INITIALIZING
				case 3:
					n.Datacenter = "dc-2"
				case 4:
					draining()(n)
				}
			}},
		{name: "constraint", want: []int{0, 2, 4},
			edit: func(i int, n *droverv1.Node) {
				if i%2 == 1 {
					n.Attributes["kernel.name"] = "windows"
				}
			},
			constraint: &droverv1.Constraint{Attribute: "kernel.name", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: "linux"}},
		{name: "node without room", want: []int{1, 2, 3, 4, 5}, exhausted: fit.DimensionMemory,
			edit: func(i int, n *droverv1.Node) {
				if i == 0 {
					n.Resources.MemoryMb = 500
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			nodes := h.addNodes(6, tc.edit)
			for _, i := range tc.down {
				h.setNodeStatus(nodes[i].GetId(), droverv1.NodeStatus_NODE_STATUS_DOWN)
			}
			j := typedJob(droverv1.JobType_JOB_TYPE_SYSTEM, 1)
			if tc.constraint != nil {
				j.Constraints = []*droverv1.Constraint{tc.constraint}
			}
			job, ev := h.register(j)
			h.process(ev)

			want := make(map[string]int)
			for _, i := range tc.want {
				want[nodes[i].GetId()] = 1
			}
			live := h.live(job.GetId())
			if got := perNode(live); !maps.Equal(got, want) {
				t.Fatalf("allocations per node %v, want one on each of nodes %v", got, tc.want)
			}
			for _, a := range live {
				if a.GetName() != allocName(job.GetId(), "web", 0) {
					t.Fatalf("allocation name %q, want index 0", a.GetName())
				}
			}
			done, _ := h.checkComplete(ev.GetId(), tc.exhausted != "")
			if tc.exhausted == "" {
				return
			}
			f := done.GetPlacementFailures()
			if len(f) != 1 || f[0].GetUnplaced() != 1 || !maps.Equal(f[0].GetExhaustedBy(), map[string]int32{tc.exhausted: 1}) {
				t.Fatalf("placement failures = %v, want 1 unplaced, exhausted by %s", f, tc.exhausted)
			}
		})
	}
}

// TestProcessSystemNodeChanges follows a system job as its cluster
// changes: a new node gets an allocation on the next evaluation and no
// other node is touched; an update replaces allocations where they are; a
// node that goes down loses its allocation, which is not placed elsewhere.
func TestProcessSystemNodeChanges(t *testing.T) {
	h := newHarness(t)
	nodes := h.addNodes(3, nil)
	job := h.runJob(typedJob(droverv1.JobType_JOB_TYPE_SYSTEM, 1))
	first := h.live(job.GetId())
	if len(first) != 3 {
		t.Fatalf("%d allocations on 3 nodes", len(first))
	}

	added := h.addNodes(1, nil)[0]
	nodes = append(nodes, added)
	ev := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	h.planner.reset()
	h.process(ev)
	h.checkComplete(ev.GetId(), false)
	live := h.live(job.GetId())
	if got := perNode(live); len(got) != 4 || got[added.GetId()] != 1 {
		t.Fatalf("allocations per node %v, want one on each of 4 nodes", got)
	}
	if len(h.planner.plans) != 1 || len(h.planner.plans[0].GetNodePlans()) != 1 || h.planner.plans[0].GetNodePlans()[0].GetNodeId() != added.GetId() {
		t.Fatalf("plans = %v, want one touching only the new node", h.planner.plans)
	}
	for _, a := range first {
		if !slices.Contains(idsOf(live), a.GetId()) {
			t.Fatalf("allocation %s on node %s replaced by a node addition", a.GetId(), a.GetNodeId())
		}
	}
	h.markRunning(job.GetId())

	before := h.live(job.GetId())
	next := job.CloneVT()
	next.TaskGroups[0].Resources.MemoryMb = 1500
	job, ev = h.register(next)
	h.process(ev)
	h.checkComplete(ev.GetId(), false)
	after := h.live(job.GetId())
	checkReplaced(t, h, before, after)
	for _, a := range after {
		old := h.snapshot().AllocByID(a.GetPreviousAllocation())
		if a.GetNodeId() != old.GetNodeId() || a.GetResources().GetMemoryMb() != 1500 {
			t.Fatalf("replacement %v of %v, want it on the same node with the new resources", a, old)
		}
	}
	h.markRunning(job.GetId())

	lostOn := nodes[0].GetId()
	h.setNodeStatus(lostOn, droverv1.NodeStatus_NODE_STATUS_DOWN)
	ev = h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	h.process(ev)
	h.checkComplete(ev.GetId(), false)
	got := perNode(h.live(job.GetId()))
	if len(got) != 3 || got[lostOn] != 0 {
		t.Fatalf("allocations per node %v, want one on each node but the down one", got)
	}
	for _, a := range after {
		if a.GetNodeId() != lostOn {
			continue
		}
		now := h.snapshot().AllocByID(a.GetId())
		if now.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP ||
			now.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST || now.GetDesiredDescription() != allocLost {
			t.Fatalf("allocation on the down node = %v, want stopped as lost", now)
		}
	}

	h.planner.reset()
	again := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	h.process(again)
	h.checkComplete(again.GetId(), false)
	if len(h.planner.plans) != 0 {
		t.Fatalf("settled system job planned %v, want nothing", h.planner.plans)
	}
}

// TestProcessSystemFailureReason checks the placement failure of a system
// job whose allocation finds no room on one node while its constraint
// filters another: the failure must say why the unplaced allocation was
// not placed (memory), not why nothing was owed on the filtered node.
func TestProcessSystemFailureReason(t *testing.T) {
	h := newHarness(t)
	// Fixed ids: the system job places on nodes in id order, the filtered
	// node last.
	ids := []string{"00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"}
	h.addNodes(2, func(i int, n *droverv1.Node) {
		n.Id = ids[i]
		if i == 0 {
			n.Resources.MemoryMb = 500
		} else {
			n.Attributes["kernel.name"] = "windows"
		}
	})
	j := typedJob(droverv1.JobType_JOB_TYPE_SYSTEM, 1)
	j.Constraints = []*droverv1.Constraint{{Attribute: "kernel.name", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: "linux"}}
	_, ev := h.register(j)
	h.process(ev)
	done, _ := h.checkComplete(ev.GetId(), true)
	f := done.GetPlacementFailures()
	if len(f) != 1 || f[0].GetUnplaced() != 1 || f[0].GetNodesExhausted() != 1 ||
		!maps.Equal(f[0].GetExhaustedBy(), map[string]int32{fit.DimensionMemory: 1}) {
		t.Fatalf("placement failures = %v, want 1 unplaced, 1 node exhausted by memory", f)
	}
}
