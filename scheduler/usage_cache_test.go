package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// dryPlanner records the plans of a scheduler and accepts them whole
// without writing anything, so that one evaluation can be planned more
// than once on the same state.
type dryPlanner struct{ plans []*droverv1.Plan }

func (p *dryPlanner) SubmitPlan(_ context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, State, error) {
	p.plans = append(p.plans, plan.CloneVT())
	return &droverv1.PlanResult{NodePlans: plan.GetNodePlans()}, nil, nil
}

func (*dryPlanner) UpdateEval(context.Context, *droverv1.Evaluation) error  { return nil }
func (*dryPlanner) CreateEval(context.Context, *droverv1.Evaluation) error  { return nil }
func (*dryPlanner) ReblockEval(context.Context, *droverv1.Evaluation) error { return nil }

// dryRun plans the evaluation on st with cfg and returns its plans with
// the ids drawn at random (new allocations', follow-up evaluations')
// blanked, so that two runs compare.
func dryRun(t *testing.T, st State, cfg Config, ev *droverv1.Evaluation) string {
	t.Helper()
	out, err := planDry(st, cfg, ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// planDry is dryRun for any goroutine.
func planDry(st State, cfg Config, ev *droverv1.Evaluation) (string, error) {
	p := &dryPlanner{}
	s, err := New(ev.GetType(), st, p, cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	defer cancel()
	if err := s.Process(ctx, ev); err != nil {
		return "", fmt.Errorf("dry run of eval %s: %w", ev.GetId(), err)
	}
	return renderPlans(st, p.plans), nil
}

// renderPlans renders plans without their random ids: a new allocation is
// named by its name, a stopped one by its id (which the state gave it).
func renderPlans(st State, plans []*droverv1.Plan) string {
	out := ""
	for _, plan := range plans {
		plan = plan.CloneVT()
		for _, np := range plan.GetNodePlans() {
			for _, a := range np.GetAllocations() {
				if !stateHas(st, a) {
					a.Id = "" // a new allocation; an updated copy keeps its id
				}
				a.DeploymentId, a.FollowupEvalId = "", ""
			}
			for _, s := range np.GetStops() {
				s.FollowupEvalId = ""
			}
		}
		plan.Deployment, plan.DeploymentUpdates = nil, nil
		out += prototext.Format(plan) + "\n---\n"
	}
	return out
}

func stateHas(st State, a *droverv1.Allocation) bool {
	for _, x := range st.NodeAllocsShared(a.GetNodeId()) {
		if x.GetId() == a.GetId() {
			return true
		}
	}
	return false
}

// cacheRun is a harness whose schedulers share a usage cache, and that
// checks every evaluation it processes plans the same with the cache as
// without it.
type cacheRun struct {
	*harness
	// old are states of earlier steps, which passes with the cache,
	// now holding newer rows, must still plan as without it.
	old []State
	// evals are the evaluations processed, planned again on old states.
	evals []*droverv1.Evaluation
	// replicas holds, per step, snapshots of its state for the
	// goroutines of concurrently.
	replicas [][]State
}

// replicas is how many goroutines plan at once in cacheRun.concurrently.
const replicas = 4

// step plans ev with and without the cache on the newest state, then
// processes it for real (with the cache), and compares the three plans.
func (r *cacheRun) step(ev *droverv1.Evaluation) {
	r.t.Helper()
	snap := r.snapshot()
	var copies []State
	for range replicas {
		copies = append(copies, r.snapshot()) // the same state as snap
	}
	plain := r.cfg
	plain.UsageCache = nil
	want := dryRun(r.t.(*testing.T), snap, plain, ev)
	if got := dryRun(r.t.(*testing.T), snap, r.cfg, ev); got != want {
		r.t.Fatalf("eval %s (%s) planned with the usage cache:\n%s\nwithout:\n%s", ev.GetId(), ev.GetTriggeredBy(), got, want)
	}
	r.planner.reset()
	r.process(ev)
	if got := renderPlans(snap, r.planner.plans); got != want {
		r.t.Fatalf("eval %s (%s) processed with the usage cache:\n%s\nplanned without:\n%s", ev.GetId(), ev.GetTriggeredBy(), got, want)
	}
	r.old = append(r.old, snap)
	r.evals = append(r.evals, ev)
	r.replicas = append(r.replicas, copies)
}

// replay plans every processed evaluation again on the state it was
// processed on, with the cache (which has seen newer rows since) and
// without, as workers holding older snapshots would.
func (r *cacheRun) replay() {
	r.t.Helper()
	plain := r.cfg
	plain.UsageCache = nil
	for i, ev := range r.evals {
		want := dryRun(r.t.(*testing.T), r.old[i], plain, ev)
		if got := dryRun(r.t.(*testing.T), r.old[i], r.cfg, ev); got != want {
			r.t.Fatalf("eval %s replayed on an older state with the usage cache:\n%s\nwithout:\n%s", ev.GetId(), got, want)
		}
	}
}

// TestUsageCacheKeepsPlans runs a sequence of evaluations that place,
// update in place, replace, lose and reschedule allocations on small nodes
// with a small dynamic port range, where every usage matters, and checks
// that each plans the same with the server's usage cache as without it,
// on the newest state and again on older ones.
func TestUsageCacheKeepsPlans(t *testing.T) {
	h := newHarness(t)
	h.cfg.UsageCache = NewUsageCache()
	r := &cacheRun{harness: h}
	nodes := h.addNodes(4, func(_ int, n *droverv1.Node) {
		n.Resources.MinDynamicPort, n.Resources.MaxDynamicPort = 20000, 20011
		n.Reserved = &droverv1.NodeReservedResources{Ports: []*droverv1.PortRange{{First: 20003, Last: 20004}}}
	})
	withPort := func(j *droverv1.Job, cpu int64) *droverv1.Job {
		j.TaskGroups[0].Resources.CpuMhz = cpu
		j.TaskGroups[0].Resources.Ports = []*droverv1.Port{{Label: "http"}}
		return j
	}
	run := func(j *droverv1.Job) *droverv1.Job {
		job, ev := h.register(j)
		r.step(ev)
		h.markRunning(job.GetId())
		return h.snapshot().JobByID(job.GetId())
	}

	a := run(withPort(testJob(5), 700))
	b := run(withPort(testJob(6), 900))
	run(withPort(testJob(3), 300))

	inPlace := a.CloneVT()
	inPlace.Meta = map[string]string{"owner": "ops"}
	a = run(inPlace)

	bigger := b.CloneVT()
	bigger.TaskGroups[0].Resources.CpuMhz = 1100
	run(bigger)

	h.setNodeStatus(nodes[1].GetId(), droverv1.NodeStatus_NODE_STATUS_DOWN)
	for _, job := range []*droverv1.Job{a, b} {
		r.step(h.newEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE))
		h.markRunning(job.GetId())
	}

	failed := h.live(a.GetId())[0]
	h.reportAt(h.now, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED, failed)
	r.step(h.newEval(a, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE))

	// Another plan's lost stop changes neither a row's length nor its
	// node object: only the row's identity tells the cache.
	var stops []*droverv1.AllocStop
	for _, x := range h.live(b.GetId()) {
		stops = append(stops, &droverv1.AllocStop{AllocId: x.GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP,
			ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST})
	}
	if _, err := h.store.UpsertPlanResults(h.next(), &droverv1.PlanResultEntry{AppliedAt: h.now, Stops: stops}); err != nil {
		t.Fatal(err)
	}
	run(withPort(testJob(6), 1200))

	r.replay()
	r.concurrently()
	if n := h.cfg.UsageCache.size(); n == 0 || n > len(nodes) {
		t.Fatalf("cache holds %d nodes, want 1..%d", n, len(nodes))
	}
}

// concurrently replays every evaluation on its state from several
// goroutines at once sharing the cache, as a server's workers do, and
// checks each plans as without the cache (the race detector watches the
// shared usages).
func (r *cacheRun) concurrently() {
	r.t.Helper()
	plain := r.cfg
	plain.UsageCache = nil
	want := make([]string, len(r.evals))
	for i, ev := range r.evals {
		want[i] = dryRun(r.t.(*testing.T), r.old[i], plain, ev)
	}
	got := make([][]string, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for g := range replicas {
		got[g] = make([]string, len(r.evals))
		wg.Go(func() {
			// Each goroutine walks the evaluations from a different one,
			// on its own copies of the states (a Snapshot is not safe for
			// concurrent use).
			for k := range r.evals {
				i := (k + g) % len(r.evals)
				if got[g][i], errs[g] = planDry(r.replicas[i][g], r.cfg, r.evals[i]); errs[g] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for g := range replicas {
		if errs[g] != nil {
			r.t.Fatal(errs[g])
		}
		for i := range r.evals {
			if got[g][i] != want[i] {
				r.t.Fatalf("goroutine %d, eval %s planned with the shared cache:\n%s\nwithout:\n%s", g, r.evals[i].GetId(), got[g][i], want[i])
			}
		}
	}
}

// TestUsageCacheKey checks that a cached usage is returned only for the
// node object and row it was built from, and that the overlay a pass takes
// leaves the cached base as it was.
func TestUsageCacheKey(t *testing.T) {
	c := newCluster(t)
	node := c.addNodes(1, nil)[0]
	job, _ := c.register(testJob(3))
	c.place(runningAlloc(job, node, nil))
	cache := NewUsageCache()
	snap := c.snapshot()
	row := snap.NodeAllocsShared(node.GetId())

	first := cache.Base(node, row)
	if again := cache.Base(node, row); again != first {
		t.Fatalf("the same node and row built a new usage")
	}
	over := first.Overlay()
	over.Add(runningAlloc(job, node, nil))
	if first.CPU != 1000 || over.CPU != 2000 {
		t.Fatalf("base cpu %d, overlay %d: want 1000 and 2000", first.CPU, over.CPU)
	}

	c.place(runningAlloc(job, node, nil))
	newer := c.snapshot().NodeAllocsShared(node.GetId())
	if u := cache.Base(node, newer); u == first || u.CPU != 2000 {
		t.Fatalf("a newer row got the usage of the old one (cpu %d)", u.CPU)
	}
	if u := cache.Base(node, row); u.CPU != 1000 {
		t.Fatalf("the old row, after a newer one, got cpu %d", u.CPU)
	}
	// A lost stop keeps the row's length and the node object: only the
	// row's identity tells that the allocation holds nothing any more.
	before := c.snapshot()
	n1, r1 := before.NodeByID(node.GetId()), before.NodeAllocsShared(node.GetId())
	cache.Base(n1, r1)
	lost := &droverv1.PlanResultEntry{AppliedAt: 5, Stops: []*droverv1.AllocStop{{AllocId: r1[0].GetId(),
		DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST}}}
	if _, err := c.store.UpsertPlanResults(c.next(), lost); err != nil {
		t.Fatal(err)
	}
	after := c.snapshot()
	n2, r2 := after.NodeByID(node.GetId()), after.NodeAllocsShared(node.GetId())
	if n2 != n1 || len(r2) != len(r1) {
		t.Fatalf("premise: a lost stop changed the node object (%v) or the row's length (%d -> %d)", n2 != n1, len(r1), len(r2))
	}
	if u := cache.Base(n2, r2); u.CPU != 1000 {
		t.Fatalf("after a lost stop the node holds cpu %d, want 1000", u.CPU)
	}

	renewed := node.CloneVT()
	renewed.Resources.CpuMhz *= 2
	if u := cache.Base(renewed, row); u.Node() != renewed {
		t.Fatalf("a re-registered node got the usage of the old node object")
	} else if cpu, _, _ := u.Capacity(); cpu != renewed.GetResources().GetCpuMhz()-renewed.GetReserved().GetCpuMhz() {
		t.Fatalf("a re-registered node offering cpu %d got a usage offering %d", renewed.GetResources().GetCpuMhz(), cpu)
	}
	if u := cache.Base(node, nil); u.CPU != 0 {
		t.Fatalf("an empty row got cpu %d", u.CPU)
	}
}

// TestUsageCacheAfterReports checks that an agent's report, which
// changes the row but not what it holds, keeps the cached usage, and that
// a report of an allocation that ended does not.
func TestUsageCacheAfterReports(t *testing.T) {
	c := newCluster(t)
	node := c.addNodes(1, nil)[0]
	job, _ := c.register(testJob(2))
	c.place(runningAlloc(job, node, nil), runningAlloc(job, node, nil))
	cache := NewUsageCache()
	before := c.snapshot().NodeAllocsShared(node.GetId())
	first := cache.Base(node, before)

	report := func(status droverv1.AllocClientStatus, desc string) []*droverv1.Allocation {
		t.Helper()
		e := &droverv1.AllocClientUpdateEntry{UpdatedAt: 9, Nodes: []*droverv1.NodeAllocUpdates{{NodeId: node.GetId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: before[0].GetId(), ClientStatus: status, ClientDescription: desc}}}}}
		if _, _, err := c.store.UpdateAllocsFromClient(c.next(), e); err != nil {
			t.Fatal(err)
		}
		return c.snapshot().NodeAllocsShared(node.GetId())
	}
	running := report(droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, "still running")
	if &running[0] == &before[0] || running[0] == before[0] {
		t.Fatal("premise: the report left the row or the allocation as it was")
	}
	if u := cache.Base(node, running); u != first {
		t.Fatal("a report that changes no resources built a new usage")
	}
	if u := cache.Base(node, before); u != first {
		t.Fatal("the row before the report lost its usage")
	}
	// The same allocations holding other resources objects (an in-place
	// update) count afresh.
	updated := slices.Clone(before)
	updated[1] = updated[1].CloneVT()
	if u := cache.Base(node, updated); u == first {
		t.Fatal("an allocation with other resources got the cached usage")
	}
	ended := report(droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, "")
	if u := cache.Base(node, ended); u == first || u.CPU != first.CPU/2 {
		t.Fatalf("after an allocation completed the node holds cpu %d, want %d", u.CPU, first.CPU/2)
	}
}

// TestUsageCacheFollowsNodeVersions rewrites a node's row in each way
// that leaves what it offers alone, through the state store, and checks
// that the cached usage is taken over, not counted again, and answers for
// the new version: the plan applier admits placements by the usage's
// node, so a usage of an older version would admit them onto a node that
// has since gone down or been drained.
func TestUsageCacheFollowsNodeVersions(t *testing.T) {
	type rewrite func(c *cluster, nodeID string, allocID string) error
	cases := []struct {
		name    string
		rewrite rewrite
		// check is what the new version must show, which the old lacked.
		check func(n *droverv1.Node) bool
	}{
		{"report", func(c *cluster, nodeID, allocID string) error {
			_, _, err := c.store.UpdateAllocsFromClient(c.next(), &droverv1.AllocClientUpdateEntry{UpdatedAt: 9,
				Nodes: []*droverv1.NodeAllocUpdates{{NodeId: nodeID, Allocs: []*droverv1.AllocClientUpdate{{AllocId: allocID,
					ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, ClientDescription: "again"}}}}})
			return err
		}, func(n *droverv1.Node) bool { return n.GetLastAllocUpdateIndex() != 0 }},
		{"status", func(c *cluster, nodeID, _ string) error {
			_, err := c.store.UpdateNodeStatus(c.next(), &droverv1.NodeStatusEntry{NodeId: nodeID,
				Status: droverv1.NodeStatus_NODE_STATUS_DOWN, UpdatedAt: 9})
			return err
		}, func(n *droverv1.Node) bool { return n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_DOWN }},
		{"eligibility", func(c *cluster, nodeID, _ string) error {
			_, err := c.store.UpdateNodeEligibility(c.next(), &droverv1.NodeEligibilityEntry{NodeId: nodeID,
				Eligibility: droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE, UpdatedAt: 9})
			return err
		}, func(n *droverv1.Node) bool {
			return n.GetSchedulingEligibility() == droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
		}},
		{"drain", func(c *cluster, nodeID, _ string) error {
			_, err := c.store.UpdateNodeDrain(c.next(), &droverv1.NodeDrainEntry{NodeId: nodeID,
				DrainStrategy: &droverv1.DrainStrategy{}, UpdatedAt: 9})
			return err
		}, func(n *droverv1.Node) bool { return n.GetDrainStrategy() != nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			node := c.addNodes(1, func(_ int, n *droverv1.Node) {
				n.Reserved = &droverv1.NodeReservedResources{CpuMhz: 100}
			})[0]
			job, _ := c.register(testJob(2))
			c.place(runningAlloc(job, node, nil), runningAlloc(job, node, nil))
			cache := NewUsageCache()
			before := c.snapshot()
			old := before.NodeByID(node.GetId())
			first := cache.Base(old, before.NodeAllocsShared(node.GetId()))
			held := func() *heldAlloc { return &entryOf(cache, node.GetId()).held[0] }
			counted := held()

			if err := tc.rewrite(c, node.GetId(), before.NodeAllocsShared(node.GetId())[0].GetId()); err != nil {
				t.Fatal(err)
			}
			after := c.snapshot()
			n, row := after.NodeByID(node.GetId()), after.NodeAllocsShared(node.GetId())
			if n == old || !tc.check(n) || tc.check(old) {
				t.Fatalf("premise: the %s did not write a new node version", tc.name)
			}
			u := cache.Base(n, row)
			if u.Node() != n {
				t.Fatalf("after the %s the usage answers for the old node version", tc.name)
			}
			if _, _, fresh := fit.AllocsFit(n, row); u.CPU != fresh.CPU || u.CPU != first.CPU {
				t.Fatalf("after the %s: cpu %d, fresh count %d, before %d", tc.name, u.CPU, fresh.CPU, first.CPU)
			}
			if held() != counted {
				t.Fatalf("after the %s the usage was counted again", tc.name)
			}
			if again := cache.Base(n, row); again != u {
				t.Fatal("the new version's usage was not kept for the next pass")
			}
			if back := cache.Base(old, before.NodeAllocsShared(node.GetId())); back.Node() != old || back.CPU != first.CPU {
				t.Fatal("a pass on the older snapshot got the newer node version")
			}
			// A version that offers more (a re-registration) is counted
			// against what it offers.
			bigger := n.CloneVT()
			bigger.Resources.CpuMhz *= 2
			if u := cache.Base(bigger, row); u.Node() != bigger || held() == counted {
				t.Fatal("a node version with other resources objects got the cached usage")
			} else if cpu, _, _ := u.Capacity(); cpu != bigger.GetResources().GetCpuMhz()-100 {
				t.Fatalf("a node offering cpu %d less 100 reserved got a usage offering %d", bigger.GetResources().GetCpuMhz(), cpu)
			}
		})
	}
}

// TestAddedTo checks what a row adds to what a cached usage held, and that
// a row freeing or changing anything held is refused.
func TestAddedTo(t *testing.T) {
	res := func() *droverv1.AllocatedResources { return &droverv1.AllocatedResources{CpuMhz: 100} }
	alloc := func(id string, r *droverv1.AllocatedResources) *droverv1.Allocation {
		return &droverv1.Allocation{Id: id, Resources: r, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN,
			ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}
	}
	ended := func(a *droverv1.Allocation) *droverv1.Allocation {
		c := a.CloneVT()
		c.Resources = a.GetResources()
		c.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
		return c
	}
	b, d, f := alloc("b", res()), alloc("d", res()), alloc("f", res())
	a, c, e, g := alloc("a", res()), alloc("c", res()), alloc("e", res()), alloc("g", res())
	before := []*droverv1.Allocation{b, ended(d), f}
	tests := []struct {
		name  string
		row   []*droverv1.Allocation
		added []string
		ok    bool
	}{
		{"the same", []*droverv1.Allocation{b, ended(d), f}, nil, true},
		{"added first, between and last", []*droverv1.Allocation{a, b, c, ended(d), e, f, g}, []string{"a", "c", "e", "g"}, true},
		{"an added allocation that holds nothing", []*droverv1.Allocation{b, ended(c), ended(d), f}, nil, true},
		{"one that held nothing gone", []*droverv1.Allocation{b, f}, nil, true},
		{"a holder gone", []*droverv1.Allocation{ended(d), f}, nil, false},
		{"a holder ended", []*droverv1.Allocation{b, ended(d), ended(f)}, nil, false},
		{"a holder with other resources", []*droverv1.Allocation{b, ended(d), alloc("f", res())}, nil, false},
		{"one that held nothing holds again", []*droverv1.Allocation{b, d, f}, nil, false},
		{"empty", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			added, ok := addedTo(heldOf(before), tt.row)
			var ids []string
			for _, x := range added {
				ids = append(ids, x.GetId())
			}
			if ok != tt.ok || (ok && !slices.Equal(ids, tt.added)) {
				t.Errorf("addedTo = %v, %t; want %v, %t", ids, ok, tt.added, tt.ok)
			}
		})
	}
}

// entryOf returns the cache's entry of a node.
func entryOf(c *UsageCache, nodeID string) usageEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.entries[nodeID]
}

// TestUsageCacheExtends places allocations on a node one at a time: each
// newer row's usage is laid over the one before, counting what a build
// from scratch counts, until maxBaseLayers, when the row is counted afresh.
func TestUsageCacheExtends(t *testing.T) {
	c := newCluster(t)
	node := c.addNodes(1, nil)[0]
	job, _ := c.register(testJob(maxBaseLayers + 2))
	cache := NewUsageCache()
	cache.Base(node, c.snapshot().NodeAllocsShared(node.GetId()))
	for i := range maxBaseLayers + 1 {
		port := int32(25000 + i)
		c.place(runningAlloc(job, node, &droverv1.AllocatedResources{CpuMhz: 100, Ports: []*droverv1.AllocatedPort{{Label: "http", Value: port}}}))
		row := c.snapshot().NodeAllocsShared(node.GetId())
		u := cache.Base(node, row)
		_, _, fresh := fit.AllocsFit(node, row)
		if u.CPU != fresh.CPU || !u.PortUsed(port) || u.PortUsed(port+1) {
			t.Fatalf("after %d placements: cpu %d (fresh %d), port %d used %t", i+1, u.CPU, fresh.CPU, port, u.PortUsed(port))
		}
		want := i + 1
		if i == maxBaseLayers {
			want = 0 // too deep: counted afresh
		}
		if layers := entryOf(cache, node.GetId()).layers; layers != want {
			t.Fatalf("after %d placements the usage lies on %d overlays, want %d", i+1, layers, want)
		}
	}
}

// TestUsageCacheLayersSurviveReports interleaves placements with agents'
// reports, which take the cached usage over: the overlays counted so far
// stay counted, so the layer bound still holds.
func TestUsageCacheLayersSurviveReports(t *testing.T) {
	c := newCluster(t)
	node := c.addNodes(1, nil)[0]
	job, _ := c.register(testJob(maxBaseLayers + 2))
	cache := NewUsageCache()
	cache.Base(node, c.snapshot().NodeAllocsShared(node.GetId()))
	for i := range maxBaseLayers + 1 {
		a := runningAlloc(job, node, nil)
		a.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
		c.place(a)
		cache.Base(node, c.snapshot().NodeAllocsShared(node.GetId()))
		e := &droverv1.AllocClientUpdateEntry{UpdatedAt: 9, Nodes: []*droverv1.NodeAllocUpdates{{NodeId: node.GetId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: a.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}}}}}
		if _, _, err := c.store.UpdateAllocsFromClient(c.next(), e); err != nil {
			t.Fatal(err)
		}
		row := c.snapshot().NodeAllocsShared(node.GetId())
		u := cache.Base(node, row)
		if _, _, fresh := fit.AllocsFit(node, row); u.CPU != fresh.CPU {
			t.Fatalf("after %d placements: cpu %d, fresh count %d", i+1, u.CPU, fresh.CPU)
		}
		want := i + 1
		if i == maxBaseLayers {
			want = 0
		}
		if got := entryOf(cache, node.GetId()).layers; got != want {
			t.Fatalf("after %d placements and their reports the usage lies on %d overlays, want %d", i+1, got, want)
		}
	}
}

// TestUsageCacheTrim checks that entries of nodes a state no longer has
// are dropped once they outnumber its nodes.
func TestUsageCacheTrim(t *testing.T) {
	cache := NewUsageCache()
	for i := range 2*10 + trimSlack + 1 {
		n := &droverv1.Node{Id: fmt.Sprintf("n%d", i), Resources: &droverv1.NodeResources{CpuMhz: 1}}
		cache.Base(n, nil)
	}
	live := func(id string) bool { return id < "n1" || id == "n5" } // n0, n5
	cache.trim(10, live)
	if n := cache.size(); n != 2 {
		t.Fatalf("after trim the cache holds %d entries, want the 2 live nodes", n)
	}
	cache.Base(&droverv1.Node{Id: "gone"}, nil)
	cache.trim(10, live)
	if n := cache.size(); n != 3 {
		t.Fatalf("a trim under the bound dropped entries: %d left, want 3", n)
	}
}

// size returns how many nodes have an entry.
func (c *UsageCache) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
