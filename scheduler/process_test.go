package scheduler

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// TestProcessPlacement places a job's allocations through Process and
// checks that a second evaluation finds nothing left to do.
func TestProcessPlacement(t *testing.T) {
	cases := []struct {
		name  string
		typ   droverv1.JobType
		count int32
		nodes int
	}{
		{"service", droverv1.JobType_JOB_TYPE_SERVICE, 5, 3},
		{"service filling every node", droverv1.JobType_JOB_TYPE_SERVICE, 12, 3},
		{"batch", droverv1.JobType_JOB_TYPE_BATCH, 3, 2},
		{"count zero", droverv1.JobType_JOB_TYPE_SERVICE, 0, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(tc.nodes, nil)
			job, ev := h.register(typedJob(tc.typ, tc.count))
			h.process(ev)
			h.checkComplete(ev.GetId(), false)
			live := h.live(job.GetId())
			if got, want := namesOf(live), namesUpTo(job, int(tc.count)); !slices.Equal(got, want) {
				t.Fatalf("placed %v, want %v", got, want)
			}
			ips := make(map[string]bool)
			for _, a := range live {
				if a.GetEvalId() != ev.GetId() || a.GetJobVersion() != job.GetVersion() || a.GetTaskGroup() != "web" ||
					a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING {
					t.Fatalf("allocation = %v, want a pending allocation of eval %s, version %d, group web", a, ev.GetId(), job.GetVersion())
				}
				if !netip.MustParsePrefix("10.10.0.0/16").Contains(netip.MustParseAddr(a.GetResources().GetIp())) || ips[a.GetResources().GetIp()] {
					t.Fatalf("allocation %s address %q, want a unique one from the allocation network", a.GetName(), a.GetResources().GetIp())
				}
				ips[a.GetResources().GetIp()] = true
			}
			if want := min(int(tc.count), 1); len(h.planner.plans) != want {
				t.Fatalf("%d plans submitted, want %d", len(h.planner.plans), want)
			}
			if len(h.planner.created) != 0 {
				t.Fatalf("evaluations created: %v", h.planner.created)
			}

			h.markRunning(job.GetId())
			h.planner.reset()
			again := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
			h.process(again)
			h.checkComplete(again.GetId(), false)
			if len(h.planner.plans) != 0 || len(h.live(job.GetId())) != int(tc.count) {
				t.Fatalf("second evaluation submitted %v, want nothing to do", h.planner.plans)
			}

			// The work finishes: a service is replaced, a batch job is done.
			h.reportAt(h.now, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, live...)
			exited := h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP)
			h.process(exited)
			h.checkComplete(exited.GetId(), false)
			want := 0
			if tc.typ == droverv1.JobType_JOB_TYPE_SERVICE {
				want = int(tc.count)
			}
			now := h.live(job.GetId())
			fresh := !slices.ContainsFunc(now, func(a *droverv1.Allocation) bool { return slices.Contains(idsOf(live), a.GetId()) })
			if len(now) != want || !fresh {
				t.Fatalf("after the work finished %v run, want %d new allocations", idsOf(now), want)
			}
		})
	}
}

// TestProcessConstraints checks that only feasible nodes are used, and
// what an evaluation that cannot place everything records.
func TestProcessConstraints(t *testing.T) {
	// Per node: rack, kernel, features ("" for none).
	shape := [][3]string{
		{"r1", "linux", "a,b,c"}, {"r1", "linux", "a"}, {"r2", "linux", "a,b"},
		{"r2", "windows", "b"}, {"r3", "linux", ""}, {"r3", "windows", "a,b"},
	}
	linux := func(i int) bool { return shape[i][1] == "linux" }
	all := func(int) bool { return true }
	constraint := func(attr string, op droverv1.ConstraintOperator, value string) *droverv1.Constraint {
		return &droverv1.Constraint{Attribute: attr, Operator: op, Value: value}
	}
	distinct := constraint("", droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS, "")
	cases := []struct {
		name     string
		count    int32
		job      []*droverv1.Constraint // on the job
		group    []*droverv1.Constraint // on the group
		allowed  func(i int) bool
		placed   int
		perNode  int              // most allocations on one node; 0: no bound
		filtered map[string]int32 // when something is left unplaced
		escaped  bool
		// classOK says whether the node's class passed the class-level
		// checks, as the blocked eval records; nil means allowed.
		classOK func(i int) bool
	}{
		{name: "attribute equal", count: 6, placed: 6, allowed: linux,
			job: []*droverv1.Constraint{constraint("kernel.name", droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, "linux")}},
		{name: "regexp", count: 6, placed: 6, allowed: func(i int) bool { return shape[i][0] != "r3" },
			group: []*droverv1.Constraint{constraint("rack", droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP, "^r[12]$")}},
		{name: "set contains", count: 5, placed: 5, allowed: func(i int) bool { return i == 0 || i == 2 || i == 5 },
			group: []*droverv1.Constraint{constraint("features", droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_SET_CONTAINS, "b, a")}},
		{name: "distinct hosts", count: 6, placed: 6, allowed: all, perNode: 1, job: []*droverv1.Constraint{distinct}},
		{name: "distinct hosts on feasible nodes", count: 4, placed: 4, allowed: linux, perNode: 1,
			group: []*droverv1.Constraint{distinct, constraint("kernel.name", droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_NOT_EQUAL, "windows")}},
		{name: "distinct hosts beyond the nodes", count: 8, placed: 6, allowed: all, perNode: 1, job: []*droverv1.Constraint{distinct},
			filtered: map[string]int32{reasonDistinctHosts: 6}, escaped: true},
		{name: "infeasible", count: 2, placed: 0, allowed: func(int) bool { return false },
			job:      []*droverv1.Constraint{constraint("kernel.name", droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, "darwin")},
			filtered: map[string]int32{"kernel.name = darwin": 6}},
		{name: "infeasible by node name", count: 1, placed: 0, allowed: func(int) bool { return false },
			group:    []*droverv1.Constraint{constraint("node.name", droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, "elsewhere")},
			filtered: map[string]int32{"node.name = elsewhere": 6}, escaped: true, classOK: all},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			nodes := h.addNodes(len(shape), func(i int, n *droverv1.Node) {
				n.Attributes = map[string]string{"rack": shape[i][0], "kernel.name": shape[i][1]}
				if shape[i][2] != "" {
					n.Attributes["features"] = shape[i][2]
				}
			})
			index := make(map[string]int)
			for i, n := range nodes {
				index[n.GetId()] = i
			}
			j := testJob(tc.count)
			j.Constraints = tc.job
			j.TaskGroups[0].Constraints = tc.group
			job, ev := h.register(j)
			h.process(ev)

			live := h.live(job.GetId())
			if len(live) != tc.placed {
				t.Fatalf("placed %d, want %d", len(live), tc.placed)
			}
			for id, n := range perNode(live) {
				if !tc.allowed(index[id]) || (tc.perNode > 0 && n > tc.perNode) {
					t.Fatalf("%d allocations on node %d %v", n, index[id], shape[index[id]])
				}
			}
			done, blocked := h.checkComplete(ev.GetId(), tc.filtered != nil)
			if blocked == nil {
				return
			}
			unplaced := tc.count - int32(tc.placed)
			f := done.GetPlacementFailures()
			if len(f) != 1 || f[0].GetUnplaced() != unplaced || f[0].GetNodesEvaluated() != 6 ||
				f[0].GetNodesFiltered() != 6 || !maps.Equal(f[0].GetFilteredBy(), tc.filtered) || f[0].GetNodesExhausted() != 0 {
				t.Fatalf("placement failures = %v, want %d unplaced, all 6 nodes filtered by %v", f, unplaced, tc.filtered)
			}
			classOK := tc.classOK
			if classOK == nil {
				classOK = tc.allowed
			}
			wantClasses := make(map[string]bool)
			for i, n := range nodes {
				wantClasses[n.ComputedClass()] = classOK(i)
			}
			if !maps.Equal(blocked.GetClassEligibility(), wantClasses) || blocked.GetEscapedComputedClass() != tc.escaped ||
				blocked.GetQueuedAllocations()["web"] != unplaced {
				t.Fatalf("blocked eval = %v, want classes %v, escaped %v, %d queued", blocked, wantClasses, tc.escaped, unplaced)
			}
		})
	}
}

// TestProcessExhausted asks for more than fits: what fits is placed and
// the rest waits in a blocked evaluation that says which node classes may
// take it.
func TestProcessExhausted(t *testing.T) {
	cases := []struct {
		name      string
		resources *droverv1.Resources
		cidr      string
		gpuNodes  bool // two more nodes of class gpu, which the job excludes
		placed    int
		exhausted string
	}{
		{name: "memory", resources: &droverv1.Resources{CpuMhz: 100, MemoryMb: 3000}, placed: 4, exhausted: fit.DimensionMemory},
		{name: "cpu", resources: &droverv1.Resources{CpuMhz: 1500, MemoryMb: 100}, placed: 4, exhausted: fit.DimensionCPU},
		{name: "static port", placed: 2, exhausted: fit.DimensionPorts,
			resources: &droverv1.Resources{CpuMhz: 100, MemoryMb: 100, Ports: []*droverv1.Port{{Label: "http", Value: 8080}}}},
		{name: "addresses", cidr: "10.0.0.0/30", placed: 2, exhausted: fit.DimensionIP,
			resources: &droverv1.Resources{CpuMhz: 100, MemoryMb: 100}},
		{name: "memory, another class filtered", gpuNodes: true, placed: 4, exhausted: fit.DimensionMemory,
			resources: &droverv1.Resources{CpuMhz: 100, MemoryMb: 3000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.cidr != "" {
				h.cfg.AllocCIDR = netip.MustParsePrefix(tc.cidr)
			}
			nodes := h.addNodes(2, nil)
			filtered := map[string]int32(nil)
			j := testJob(6)
			j.TaskGroups[0].Resources = tc.resources
			if tc.gpuNodes {
				nodes = append(nodes, h.addNodes(2, func(_ int, n *droverv1.Node) { n.NodeClass = "gpu" })...)
				j.Constraints = []*droverv1.Constraint{{Attribute: "node.class", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: "standard"}}
				filtered = map[string]int32{"node.class = standard": 2}
			}
			job, ev := h.register(j)
			h.process(ev)

			if live := h.live(job.GetId()); len(live) != tc.placed {
				t.Fatalf("placed %d, want %d", len(live), tc.placed)
			}
			done, blocked := h.checkComplete(ev.GetId(), true)
			unplaced := int32(6 - tc.placed)
			f := done.GetPlacementFailures()
			if len(f) != 1 || f[0].GetTaskGroup() != "web" || f[0].GetUnplaced() != unplaced ||
				f[0].GetNodesEvaluated() != int32(len(nodes)) || f[0].GetNodesExhausted() != 2 ||
				!maps.Equal(f[0].GetExhaustedBy(), map[string]int32{tc.exhausted: 2}) || !maps.Equal(f[0].GetFilteredBy(), filtered) ||
				f[0].GetNodesAvailable()["dc-1"] != int32(len(nodes)) {
				t.Fatalf("placement failures = %v, want %d unplaced, 2 nodes exhausted by %s, filtered %v", f, unplaced, tc.exhausted, filtered)
			}
			wantClasses := map[string]bool{nodes[0].ComputedClass(): true}
			if tc.gpuNodes {
				wantClasses[nodes[2].ComputedClass()] = false
			}
			if blocked.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_QUEUED_ALLOCS || blocked.GetEscapedComputedClass() ||
				!maps.Equal(blocked.GetClassEligibility(), wantClasses) ||
				!maps.Equal(blocked.GetQueuedAllocations(), map[string]int32{"web": unplaced}) ||
				!maps.Equal(done.GetQueuedAllocations(), map[string]int32{"web": unplaced}) {
				t.Fatalf("blocked eval = %v (done %v), want %d queued, classes %v", blocked, done, unplaced, wantClasses)
			}
		})
	}
}

// TestProcessBlockedEval follows a blocked evaluation: a static port held
// by an allocation that is stopping but still running is not reused; the
// blocked evaluation goes back to the blocked set while nothing changed and
// completes once the port is free.
func TestProcessBlockedEval(t *testing.T) {
	h := newHarness(t)
	nodes := h.addNodes(2, nil)
	holderJob, _ := h.register(testJob(1))
	holder := runningAlloc(holderJob, nodes[0], &droverv1.AllocatedResources{
		CpuMhz: 100, MemoryMb: 100, Ports: []*droverv1.AllocatedPort{{Label: "http", Value: 8080}},
	})
	h.place(holder)
	h.report(nodes[0].GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, holder.GetId())
	h.stop(holder.GetId())

	j := testJob(2)
	j.TaskGroups[0].Resources.Ports = []*droverv1.Port{{Label: "http", Value: 8080}}
	job, ev := h.register(j)
	h.process(ev)
	live := h.live(job.GetId())
	if len(live) != 1 || live[0].GetNodeId() != nodes[1].GetId() {
		t.Fatalf("placed %v, want one allocation, on the node whose port is free", perNode(live))
	}
	done, blocked := h.checkComplete(ev.GetId(), true)
	if f := done.GetPlacementFailures(); len(f) != 1 || f[0].GetExhaustedBy()[fit.DimensionPorts] != 2 {
		t.Fatalf("placement failures = %v, want 2 nodes exhausted by ports", f)
	}

	h.planner.reset()
	h.process(blocked)
	if len(h.planner.reblocked) != 1 || len(h.planner.created) != 0 || len(h.planner.updated) != 0 || len(h.planner.plans) != 0 {
		t.Fatalf("blocked eval without new capacity: reblocked %d, created %d, updated %d, plans %d; want reblocked only",
			len(h.planner.reblocked), len(h.planner.created), len(h.planner.updated), len(h.planner.plans))
	}
	if rb := h.planner.reblocked[0]; rb.GetId() != blocked.GetId() || rb.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_BLOCKED ||
		rb.GetPlacementFailures()[0].GetUnplaced() != 1 || len(rb.GetClassEligibility()) != 1 {
		t.Fatalf("reblocked eval = %v, want the blocked eval, still blocked, 1 unplaced", rb)
	}

	h.report(nodes[0].GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, holder.GetId())
	h.planner.reset()
	h.process(h.evalOf(blocked.GetId()))
	h.checkComplete(blocked.GetId(), false)
	if got := perNode(h.live(job.GetId())); len(got) != 2 || got[nodes[0].GetId()] != 1 {
		t.Fatalf("placed %v, want one allocation per node", got)
	}
	if len(h.planner.reblocked) != 0 || len(h.planner.created) != 0 {
		t.Fatalf("reblocked %v, created %v, want neither", h.planner.reblocked, h.planner.created)
	}
}

// TestProcessSpread spreads over racks, evenly or by targets; each rack's
// count ends within one of its ideal share.
func TestProcessSpread(t *testing.T) {
	cases := []struct {
		name    string
		racks   []string // per node
		count   int32
		targets map[string]int32
		// existing allocations, placed on the first nodes before the
		// evaluation.
		existing int
	}{
		{name: "even", racks: []string{"r1", "r2", "r3", "r1", "r2", "r3", "r1", "r2", "r3"}, count: 9},
		{name: "even, uneven division", racks: []string{"r1", "r2", "r3", "r1", "r2", "r3", "r1", "r2", "r3"}, count: 10},
		{name: "uneven rack sizes", racks: []string{"r1", "r2", "r2", "r3", "r3", "r3", "r3", "r3", "r3"}, count: 9},
		{name: "targets", racks: []string{"r1", "r2", "r3", "r1", "r2", "r3", "r1", "r2", "r3"}, count: 10,
			targets: map[string]int32{"r1": 50, "r2": 30, "r3": 20}},
		{name: "existing allocations count", racks: []string{"r1", "r1", "r1", "r2", "r2", "r2", "r3", "r3", "r3"}, count: 9, existing: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			nodes := h.addNodes(len(tc.racks), func(i int, n *droverv1.Node) {
				n.Attributes = map[string]string{"rack": tc.racks[i]}
				n.Resources = &droverv1.NodeResources{CpuMhz: 14000, MemoryMb: 32000}
			})
			j := testJob(tc.count)
			sp := &droverv1.Spread{Attribute: "rack", Weight: 100}
			for _, v := range slices.Sorted(maps.Keys(tc.targets)) {
				sp.Targets = append(sp.Targets, &droverv1.SpreadTarget{Value: v, Percent: tc.targets[v]})
			}
			j.TaskGroups[0].Spreads = []*droverv1.Spread{sp}
			job, ev := h.register(j)
			for i := range tc.existing {
				a := runningAlloc(job, nodes[i], nil)
				a.Name = allocName(job.GetId(), "web", i)
				h.place(a)
			}
			h.process(ev)
			h.checkComplete(ev.GetId(), false)

			live := h.live(job.GetId())
			if len(live) != int(tc.count) {
				t.Fatalf("%d allocations, want %d", len(live), tc.count)
			}
			got := rackCounts(t, h.snapshot(), live)
			racks := slices.Compact(slices.Sorted(slices.Values(tc.racks)))
			for _, r := range racks {
				ideal := float64(tc.count) / float64(len(racks))
				if tc.targets != nil {
					ideal = float64(tc.count) * float64(tc.targets[r]) / 100
				}
				if d := float64(got[r]) - ideal; d > 1 || d < -1 {
					t.Fatalf("rack counts %v, want %s within 1 of %.2f", got, r, ideal)
				}
			}
		})
	}
}

// TestProcessUpdates registers a new version of a running job: changes
// that leave placement and tasks alone update allocations in place, others
// replace them.
func TestProcessUpdates(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(j *droverv1.Job)
		inPlace bool
	}{
		{"job meta", func(j *droverv1.Job) { j.Meta = map[string]string{"owner": "ops"} }, true},
		{"group meta", func(j *droverv1.Job) { j.TaskGroups[0].Meta = map[string]string{"tier": "web"} }, true},
		{"reschedule policy", func(j *droverv1.Job) {
			j.TaskGroups[0].ReschedulePolicy.Delay = durationpb.New(2 * j.TaskGroups[0].ReschedulePolicy.GetDelay().AsDuration())
		}, true},
		{"cpu", func(j *droverv1.Job) { j.TaskGroups[0].Resources.CpuMhz = 1200 }, false},
		{"task config", func(j *droverv1.Job) { j.TaskGroups[0].Tasks[0].Config = map[string]string{"image": "web:2"} }, false},
		{"task env", func(j *droverv1.Job) { j.TaskGroups[0].Tasks[0].Env = map[string]string{"MODE": "fast"} }, false},
		{"datacenters", func(j *droverv1.Job) { j.Datacenters = append(j.Datacenters, "dc-2") }, false},
		{"group constraint", func(j *droverv1.Job) {
			j.TaskGroups[0].Constraints = []*droverv1.Constraint{{Attribute: "kernel.name", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: "linux"}}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(3, nil)
			job := h.runJob(testJob(3))
			before := h.live(job.GetId())
			next := job.CloneVT()
			tc.edit(next)
			job, ev := h.register(next)
			if job.GetVersion() != 1 {
				t.Fatalf("job version = %d, want 1", job.GetVersion())
			}
			h.planner.reset()
			h.process(ev)
			h.checkComplete(ev.GetId(), false)

			live := h.live(job.GetId())
			if got, want := namesOf(live), namesUpTo(job, 3); !slices.Equal(got, want) {
				t.Fatalf("running %v, want %v", got, want)
			}
			for _, a := range live {
				if a.GetJobVersion() != 1 || a.GetEvalId() != ev.GetId() {
					t.Fatalf("allocation %s at version %d from eval %s, want version 1 from %s", a.GetName(), a.GetJobVersion(), a.GetEvalId(), ev.GetId())
				}
			}
			if len(h.planner.plans) != 1 {
				t.Fatalf("%d plans, want 1", len(h.planner.plans))
			}
			stops := 0
			for _, np := range h.planner.plans[0].GetNodePlans() {
				stops += len(np.GetStops())
			}
			if tc.inPlace {
				if !slices.Equal(idsOf(live), idsOf(before)) || stops != 0 {
					t.Fatalf("in place update: ids %v -> %v, %d stops; want the same allocations, no stops", idsOf(before), idsOf(live), stops)
				}
				return
			}
			checkReplaced(t, h, before, live)
		})
	}
}

// TestProcessUpdateUnplaceable checks that a destructive update no node can
// take stops nothing: the old allocations keep running, and the
// evaluation leaves a blocked one behind.
func TestProcessUpdateUnplaceable(t *testing.T) {
	h := newHarness(t)
	h.addNodes(3, nil)
	job := h.runJob(testJob(3))
	before := h.live(job.GetId())
	next := job.CloneVT()
	next.TaskGroups[0].Resources.CpuMhz = 1_000_000
	_, ev := h.register(next)
	h.planner.reset()
	h.process(ev)
	h.checkComplete(ev.GetId(), true)
	if got := h.live(job.GetId()); !slices.Equal(idsOf(got), idsOf(before)) {
		t.Fatalf("running %v after an unplaceable update, want the old %v", idsOf(got), idsOf(before))
	}
	for _, p := range h.planner.plans {
		for _, np := range p.GetNodePlans() {
			if len(np.GetStops()) > 0 {
				t.Fatalf("plan stops %v for an update it cannot place", np.GetStops())
			}
		}
	}
}

// checkReplaced checks that every allocation of before was stopped for an
// update and replaced by one of after, which takes over its name.
func checkReplaced(t *testing.T, h *harness, before, after []*droverv1.Allocation) {
	t.Helper()
	byPrev := make(map[string]*droverv1.Allocation)
	for _, a := range after {
		byPrev[a.GetPreviousAllocation()] = a
	}
	snap := h.snapshot()
	for _, old := range before {
		now := snap.AllocByID(old.GetId())
		repl := byPrev[old.GetId()]
		if now.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP || now.GetDesiredDescription() != allocUpdating {
			t.Fatalf("old allocation %s desired %s %q, want stopped for the update", old.GetName(), now.GetDesiredStatus(), now.GetDesiredDescription())
		}
		if repl == nil || repl.GetName() != old.GetName() || now.GetNextAllocation() != repl.GetId() {
			t.Fatalf("old allocation %s replaced by %v (next %q), want a replacement with its name", old.GetName(), repl, now.GetNextAllocation())
		}
	}
}

// TestProcessScale changes a running job's count.
func TestProcessScale(t *testing.T) {
	cases := []struct{ from, to int32 }{{10, 4}, {4, 10}, {3, 0}, {0, 3}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d to %d", tc.from, tc.to), func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(3, nil)
			job := h.runJob(testJob(tc.from))
			before := h.live(job.GetId())
			next := job.CloneVT()
			next.TaskGroups[0].Count = tc.to
			job, ev := h.register(next)
			h.process(ev)
			h.checkComplete(ev.GetId(), false)

			live := h.live(job.GetId())
			if got, want := namesOf(live), namesUpTo(job, int(tc.to)); !slices.Equal(got, want) {
				t.Fatalf("running %v, want %v", got, want)
			}
			kept := 0
			for _, a := range before {
				now := h.snapshot().AllocByID(a.GetId())
				switch idx, _ := allocNameIndex(a.GetName()); {
				case idx < int(tc.to):
					if now.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN || now.GetJobVersion() != job.GetVersion() {
						t.Fatalf("allocation %s = %v, want kept, updated in place", a.GetName(), now)
					}
					kept++
				case now.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP || now.GetDesiredDescription() != allocNotNeeded:
					t.Fatalf("allocation %s = %v, want stopped as not needed", a.GetName(), now)
				}
			}
			if kept != int(min(tc.from, tc.to)) {
				t.Fatalf("%d allocations kept, want %d", kept, min(tc.from, tc.to))
			}
		})
	}
}

// TestProcessJobStop deregisters a running job: every allocation is asked
// to stop and nothing is placed.
func TestProcessJobStop(t *testing.T) {
	for _, typ := range []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE, droverv1.JobType_JOB_TYPE_BATCH, droverv1.JobType_JOB_TYPE_SYSTEM} {
		t.Run(typ.String(), func(t *testing.T) {
			h := newHarness(t)
			h.addNodes(3, nil)
			job := h.runJob(typedJob(typ, 4))
			before := h.live(job.GetId())
			if len(before) == 0 {
				t.Fatal("nothing placed before the stop")
			}
			ev := h.deregister(job)
			h.planner.reset()
			h.process(ev)
			h.checkComplete(ev.GetId(), false)
			if live := h.live(job.GetId()); len(live) != 0 {
				t.Fatalf("%d allocations still wanted running", len(live))
			}
			for _, a := range h.allocsOf(job.GetId()) {
				if a.GetDesiredDescription() != allocJobStopped {
					t.Fatalf("allocation %s stopped with %q, want %q", a.GetName(), a.GetDesiredDescription(), allocJobStopped)
				}
			}
			for _, np := range h.planner.plans[0].GetNodePlans() {
				if len(np.GetAllocations()) > 0 {
					t.Fatalf("stop plan places or updates %v", np.GetAllocations())
				}
			}
			if n := len(h.allocsOf(job.GetId())); n != len(before) {
				t.Fatalf("%d allocations after the stop, want the %d there were", n, len(before))
			}
		})
	}
}

// TestCommittedAny tells a partly committed plan's answer from one that
// committed nothing, whether the leader counted the committed node plans
// and left them out (a worker on a follower asks it to) or sent them, as a
// leader before committed_nodes did.
func TestCommittedAny(t *testing.T) {
	part := []*droverv1.NodePlan{{NodeId: "n1"}}
	for _, tc := range []struct {
		name   string
		result *droverv1.PlanResult
		want   bool
	}{
		{"counted, left out", &droverv1.PlanResult{CommittedNodes: 1, RejectedNodeIds: []string{"n2"}}, true},
		{"counted and sent", &droverv1.PlanResult{CommittedNodes: 1, NodePlans: part}, true},
		{"sent, not counted", &droverv1.PlanResult{NodePlans: part, RejectedNodeIds: []string{"n2"}}, true},
		{"nothing committed", &droverv1.PlanResult{RejectedNodeIds: []string{"n1", "n2"}}, false},
	} {
		if got := committedAny(tc.result); got != tc.want {
			t.Errorf("%s: committedAny = %t, want %t", tc.name, got, tc.want)
		}
	}
}
