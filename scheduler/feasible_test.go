package scheduler

import (
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestConstraintSatisfied(t *testing.T) {
	node := &droverv1.Node{
		Id: "0b0e5a6c-0000-4000-8000-000000000001", Name: "web-1", Datacenter: "dc-1", NodeClass: "large",
		Attributes: map[string]string{"rack": "r7", "cores": "16", "kernel.version": "6.1", "features": "avx, sse4,gpu"},
	}
	type op = droverv1.ConstraintOperator
	const (
		eq          = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL
		ne          = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_NOT_EQUAL
		lt          = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_LESS_THAN
		le          = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_LESS_THAN_OR_EQUAL
		gt          = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_GREATER_THAN
		ge          = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_GREATER_THAN_OR_EQUAL
		re          = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP
		setContains = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_SET_CONTAINS
		isSet       = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_SET
		isNotSet    = droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_NOT_SET
	)
	cases := []struct {
		name  string
		attr  string
		op    op
		value string
		want  bool
	}{
		{"equal attribute", "rack", eq, "r7", true},
		{"equal differs", "rack", eq, "r8", false},
		{"equal missing", "zone", eq, "a", false},
		{"datacenter", "node.datacenter", eq, "dc-1", true},
		{"class", "node.class", eq, "large", true},
		{"name", "node.name", eq, "web-1", true},
		{"id", "node.id", eq, "0b0e5a6c-0000-4000-8000-000000000001", true},
		{"not equal", "rack", ne, "r8", true},
		{"not equal same", "rack", ne, "r7", false},
		{"not equal missing", "zone", ne, "a", true},
		{"less than integers", "cores", lt, "100", true},
		{"less than lexical would differ", "cores", gt, "9", true},
		{"less or equal", "cores", le, "16", true},
		{"less or equal below", "cores", le, "15", false},
		{"greater than", "cores", gt, "16", false},
		{"greater or equal", "cores", ge, "16", true},
		{"lexical when not integers", "kernel.version", ge, "5.10", true},
		{"lexical less", "rack", lt, "r8", true},
		{"ordering missing", "zone", lt, "z", false},
		{"regexp match", "rack", re, "^r[0-9]$", true},
		{"regexp no match", "rack", re, "^r1[0-9]$", false},
		{"regexp invalid", "rack", re, "([", false},
		{"set contains all", "features", setContains, "gpu,avx", true},
		{"set contains trims", "features", setContains, " sse4 ", true},
		{"set contains missing element", "features", setContains, "avx,neon", false},
		{"set contains missing attribute", "zone", setContains, "a", false},
		{"is set", "rack", isSet, "", true},
		{"is set missing", "zone", isSet, "", false},
		{"is not set", "zone", isNotSet, "", true},
		{"is not set present", "rack", isNotSet, "", false},
		{"unspecified operator", "rack", droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_UNSPECIFIED, "r7", false},
	}
	c := newCluster(t)
	job, ev := c.register(testJob(1))
	ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := newConstraintCheck(ec, &droverv1.Constraint{Attribute: tc.attr, Operator: tc.op, Value: tc.value})
			if got := cc.satisfied(node); got != tc.want {
				t.Fatalf("%s on %v = %v, want %v", cc.text, node.GetAttributes(), got, tc.want)
			}
		})
	}
}

// TestFeasibilityFilters places one allocation on a cluster where one node
// fits and the others are each filtered for one reason, and checks the
// reasons the failure of an impossible placement reports.
func TestFeasibilityFilters(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(n *droverv1.Node)
		reason string
	}{
		{"not ready", func(n *droverv1.Node) { n.Status = droverv1.NodeStatus_NODE_STATUS_INITIALIZING }, reasonNotReady},
		{"ineligible", func(n *droverv1.Node) {
			n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
		}, reasonIneligible},
		{"draining", func(n *droverv1.Node) { n.DrainStrategy = &droverv1.DrainStrategy{StartedAt: 1} }, reasonDraining},
		{"datacenter", func(n *droverv1.Node) { n.Datacenter = "dc-9" }, reasonDatacenter},
		{"job constraint", func(n *droverv1.Node) { n.Attributes["kernel.name"] = "windows" }, "kernel.name = linux"},
		{"group constraint", func(n *droverv1.Node) { n.Attributes["rack"] = "r2" }, "rack regexp ^r1$"},
		{"node name constraint", func(n *droverv1.Node) { n.Name = "db-1" }, "node.name != db-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			nodes := c.addNodes(3, func(i int, n *droverv1.Node) {
				if i > 0 {
					tc.edit(n)
				}
			})
			j := testJob(1)
			j.Constraints = []*droverv1.Constraint{{Attribute: "kernel.name", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: "linux"}}
			j.TaskGroups[0].Constraints = []*droverv1.Constraint{
				{Attribute: "rack", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP, Value: "^r1$"},
				{Attribute: "node.name", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_NOT_EQUAL, Value: "db-1"},
			}
			job, ev := c.register(j)
			ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
			st := newStack(ec, job)
			tg := job.GetTaskGroups()[0]
			rn := st.selectNode(tg, selectOptions{})
			if rn == nil || rn.node.GetId() != nodes[0].GetId() {
				t.Fatalf("selected %v, want the one feasible node %s", rn, nodes[0].GetId())
			}
			// Ask for more than any node has: every node is now evaluated.
			big := tg.CloneVT()
			big.Resources.CpuMhz = 1_000_000
			if rn := st.selectNode(big, selectOptions{}); rn != nil {
				t.Fatalf("selected %s for an impossible ask", rn.node.GetId())
			}
			f := st.failure(big)
			if f.GetNodesEvaluated() != 3 || f.GetNodesFiltered() != 2 || f.GetFilteredBy()[tc.reason] != 2 ||
				f.GetNodesExhausted() != 1 || f.GetExhaustedBy()["cpu"] != 1 {
				t.Fatalf("failure = %v, want 3 evaluated, 2 filtered by %q, 1 exhausted by cpu", f, tc.reason)
			}
			if f.GetTaskGroup() != "web" || f.GetUnplaced() != 0 {
				t.Fatalf("failure = %v, want group web and unplaced left to the caller", f)
			}
		})
	}
}

// TestFeasibilityClassCache checks that class-capturable constraints run
// once per computed class, and that classEligibility reports them.
func TestFeasibilityClassCache(t *testing.T) {
	c := newCluster(t)
	c.addNodes(40, func(i int, n *droverv1.Node) {
		n.Attributes["rack"] = []string{"r1", "r2", "r3", "r4"}[i%4]
	})
	j := testJob(4)
	j.TaskGroups[0].Constraints = []*droverv1.Constraint{{Attribute: "rack", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP, Value: "^r[12]$"}}
	job, ev := c.register(j)
	snap := c.snapshot()
	ec := newEvalContext(snap, fixedCfg(), ev, job)
	st := newStack(ec, job)
	tg := job.GetTaskGroups()[0]
	// Check every node, as a selection that finds nothing does.
	for _, ns := range st.candidates {
		st.group(tg).feas.check(ec, ns)
	}
	feas := st.group(tg).feas
	if len(feas.byClass) != 4 {
		t.Fatalf("class cache holds %d classes, want 4 (one per rack)", len(feas.byClass))
	}
	eligible, escaped := st.classEligibility()
	if escaped {
		t.Fatalf("escaped with only attribute constraints")
	}
	want := make(map[string]bool)
	for n := range snap.Nodes() {
		r := n.GetAttributes()["rack"]
		want[n.ComputedClass()] = r == "r1" || r == "r2"
	}
	if len(eligible) != len(want) {
		t.Fatalf("class eligibility = %v, want %v", eligible, want)
	}
	for class, ok := range want {
		if eligible[class] != ok {
			t.Fatalf("class %s eligible = %v, want %v", class, eligible[class], ok)
		}
	}
}

func TestJobEscapesClasses(t *testing.T) {
	cases := []struct {
		name    string
		job     []*droverv1.Constraint
		group   []*droverv1.Constraint
		escapes bool
	}{
		{"attributes only", []*droverv1.Constraint{{Attribute: "rack", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: "r1"}}, nil, false},
		{"node id", nil, []*droverv1.Constraint{{Attribute: "node.id", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_NOT_EQUAL, Value: "x"}}, true},
		{"node name", []*droverv1.Constraint{{Attribute: "node.name", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: "x"}}, nil, true},
		{"distinct hosts", nil, []*droverv1.Constraint{{Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := testJob(1)
			j.Constraints = tc.job
			j.TaskGroups[0].Constraints = tc.group
			if got := jobEscapesClasses(j); got != tc.escapes {
				t.Fatalf("escapes = %v, want %v", got, tc.escapes)
			}
		})
	}
}

// TestDistinctHosts checks that no two live allocations of the job (or of
// the group, for a group-level constraint) share a node, counting existing
// allocations and the plan's placements, and that stopped ones do not
// count.
func TestDistinctHosts(t *testing.T) {
	for _, level := range []string{"job", "group"} {
		t.Run(level, func(t *testing.T) {
			c := newCluster(t)
			nodes := c.addNodes(4, nil)
			j := testJob(4)
			distinct := []*droverv1.Constraint{{Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS}}
			if level == "job" {
				j.Constraints = distinct
			} else {
				j.TaskGroups[0].Constraints = distinct
			}
			job, ev := c.register(j)
			existing := runningAlloc(job, nodes[0], nil)
			stopped := runningAlloc(job, nodes[1], nil)
			c.place(existing, stopped)
			c.stop(stopped.GetId())
			ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
			st := newStack(ec, job)
			placed := placeAll(ec, st, job, 4)
			if len(placed) != 3 {
				t.Fatalf("placed %d, want 3 (one node holds a live allocation)", len(placed))
			}
			seen := perNode(placed)
			if seen[nodes[0].GetId()] != 0 || len(seen) != 3 {
				t.Fatalf("placements per node = %v, want one on each node but %s", seen, nodes[0].GetId())
			}
			f := st.failure(job.GetTaskGroups()[0])
			if f.GetFilteredBy()[reasonDistinctHosts] != 4 {
				t.Fatalf("failure = %v, want 4 nodes filtered by distinct_hosts", f)
			}
		})
	}
}

func TestClassKey(t *testing.T) {
	base := func() *droverv1.Node {
		return &droverv1.Node{Id: "a", Name: "n1", Datacenter: "dc-1", NodeClass: "large",
			Attributes: map[string]string{"rack": "r1", "zone": "z1", "kernel.name": "linux"}}
	}
	same := base()
	same.Id, same.Name = "b", "n2"
	if classKey(base()) != classKey(same) {
		t.Fatalf("nodes differing only in id and name have different class keys")
	}
	cases := map[string]func(n *droverv1.Node){
		"datacenter":          func(n *droverv1.Node) { n.Datacenter = "dc-2" },
		"class":               func(n *droverv1.Node) { n.NodeClass = "small" },
		"attribute value":     func(n *droverv1.Node) { n.Attributes["rack"] = "r2" },
		"values swapped":      func(n *droverv1.Node) { n.Attributes["rack"], n.Attributes["zone"] = "z1", "r1" },
		"extra attribute":     func(n *droverv1.Node) { n.Attributes["gpu"] = "" },
		"separator moved":     func(n *droverv1.Node) { n.Datacenter, n.NodeClass = "dc-1l", "arge" },
		"attribute renamed":   func(n *droverv1.Node) { delete(n.Attributes, "zone"); n.Attributes["zone2"] = "z1" },
		"attribute missing":   func(n *droverv1.Node) { delete(n.Attributes, "zone") },
		"class moved to attr": func(n *droverv1.Node) { n.NodeClass = ""; n.Attributes["large"] = "" },
	}
	for name, edit := range cases {
		n := base()
		edit(n)
		if classKey(n) == classKey(base()) {
			t.Errorf("%s: same class key as the original node", name)
		}
	}
}
