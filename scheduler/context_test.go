package scheduler

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// The state store's snapshot is what schedulers run against.
var _ State = (*state.Snapshot)(nil)

// cluster is a state store written through its raft-entry methods, so that
// placement tests see exactly what a server would.
type cluster struct {
	t     testing.TB
	store *state.StateStore
	index uint64
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	s, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, store: s}
}

func (c *cluster) next() uint64 {
	c.index++
	return c.index
}

// testNode returns a ready-to-register node in dc-1 with 4,000 MHz and
// 8,000 MB.
func testNode(i int) *droverv1.Node {
	return &droverv1.Node{
		Id:         uuid.NewString(),
		SecretId:   uuid.NewString(),
		Name:       fmt.Sprintf("node-%d", i),
		Datacenter: "dc-1",
		NodeClass:  "standard",
		Attributes: map[string]string{"rack": "r1", "kernel.name": "linux"},
		Resources:  &droverv1.NodeResources{CpuMhz: 4000, MemoryMb: 8000, DiskMb: 100000},
	}
}

// addNodes registers n nodes in one entry, shaped by edit, and makes each
// ready unless edit left a status to keep it at (initializing).
func (c *cluster) addNodes(n int, edit func(i int, node *droverv1.Node)) []*droverv1.Node {
	c.t.Helper()
	nodes := make([]*droverv1.Node, n)
	ready := make([]bool, n)
	for i := range nodes {
		nodes[i] = testNode(i)
		nodes[i].Status = droverv1.NodeStatus_NODE_STATUS_READY
		if edit != nil {
			edit(i, nodes[i])
		}
		ready[i] = nodes[i].Status == droverv1.NodeStatus_NODE_STATUS_READY
	}
	entry := &droverv1.NodeRegisterEntry{RegisteredAt: 1}
	for _, node := range nodes {
		entry.Nodes = append(entry.Nodes, node.CloneVT())
	}
	res, _, err := c.store.UpsertNodes(c.next(), entry)
	if err != nil {
		c.t.Fatalf("register nodes: %v", err)
	}
	for i, err := range res.Errors {
		if err != nil {
			c.t.Fatalf("register node %d: %v", i, err)
		}
	}
	for i, node := range nodes {
		if !ready[i] {
			continue
		}
		if _, err := c.store.UpdateNodeStatus(c.next(), &droverv1.NodeStatusEntry{
			NodeId: node.GetId(), Status: droverv1.NodeStatus_NODE_STATUS_READY, UpdatedAt: 2,
		}); err != nil {
			c.t.Fatalf("make node %s ready: %v", node.GetId(), err)
		}
	}
	snap := c.store.Snapshot()
	for i, node := range nodes {
		nodes[i] = snap.NodeByID(node.GetId())
	}
	return nodes
}

// testJob returns a service job in dc-1 with one group "web" of count
// allocations asking 1,000 MHz and 1,000 MB.
func testJob(count int32) *droverv1.Job {
	j := &droverv1.Job{
		Id:          "job-" + uuid.NewString()[:8],
		Type:        droverv1.JobType_JOB_TYPE_SERVICE,
		Datacenters: []string{"dc-1"},
		TaskGroups: []*droverv1.TaskGroup{{
			Name:      "web",
			Count:     count,
			Resources: &droverv1.Resources{CpuMhz: 1000, MemoryMb: 1000},
			Tasks:     []*droverv1.Task{{Name: "server", Driver: "exec"}},
		}},
	}
	j.Canonicalize()
	return j
}

// register stores the job and returns it as stored, with its evaluation.
func (c *cluster) register(j *droverv1.Job) (*droverv1.Job, *droverv1.Evaluation) {
	c.t.Helper()
	ev := &droverv1.Evaluation{
		Id: uuid.NewString(), Priority: j.GetPriority(), Type: j.GetType(), JobId: j.GetId(),
		TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, Status: droverv1.EvalStatus_EVAL_STATUS_PENDING,
	}
	if _, _, err := c.store.UpsertJob(c.next(), &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: ev.CloneVT(), SubmittedAt: 3}); err != nil {
		c.t.Fatalf("register job %s: %v", j.GetId(), err)
	}
	snap := c.store.Snapshot()
	return snap.JobByID(j.GetId()), snap.EvalByID(ev.GetId())
}

// runningAlloc returns a running allocation of the job's first group on the node.
func runningAlloc(job *droverv1.Job, node *droverv1.Node, res *droverv1.AllocatedResources) *droverv1.Allocation {
	tg := job.GetTaskGroups()[0]
	if res == nil {
		res = &droverv1.AllocatedResources{CpuMhz: tg.GetResources().GetCpuMhz(), MemoryMb: tg.GetResources().GetMemoryMb()}
	}
	return &droverv1.Allocation{
		Id:            uuid.NewString(),
		Name:          job.GetId() + "." + tg.GetName() + "[0]",
		NodeId:        node.GetId(),
		JobId:         job.GetId(),
		JobVersion:    job.GetVersion(),
		TaskGroup:     tg.GetName(),
		Resources:     res,
		DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN,
		ClientStatus:  droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING,
	}
}

// place writes allocations through a plan result.
func (c *cluster) place(allocs ...*droverv1.Allocation) {
	c.t.Helper()
	e := &droverv1.PlanResultEntry{AppliedAt: 4}
	for _, a := range allocs {
		e.Allocations = append(e.Allocations, a.CloneVT())
	}
	if _, err := c.store.UpsertPlanResults(c.next(), e); err != nil {
		c.t.Fatalf("place allocations: %v", err)
	}
}

// stop asks for allocations to stop, as a committed plan would.
func (c *cluster) stop(ids ...string) {
	c.t.Helper()
	e := &droverv1.PlanResultEntry{AppliedAt: 5}
	for _, id := range ids {
		e.Stops = append(e.Stops, &droverv1.AllocStop{AllocId: id, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP})
	}
	if _, err := c.store.UpsertPlanResults(c.next(), e); err != nil {
		c.t.Fatalf("stop allocations: %v", err)
	}
}

// report records an agent's report of its allocations' client status.
func (c *cluster) report(nodeID string, status droverv1.AllocClientStatus, ids ...string) {
	c.t.Helper()
	group := &droverv1.NodeAllocUpdates{NodeId: nodeID}
	for _, id := range ids {
		group.Allocs = append(group.Allocs, &droverv1.AllocClientUpdate{AllocId: id, ClientStatus: status})
	}
	if _, _, err := c.store.UpdateAllocsFromClient(c.next(), &droverv1.AllocClientUpdateEntry{
		Nodes: []*droverv1.NodeAllocUpdates{group}, UpdatedAt: 6,
	}); err != nil {
		c.t.Fatalf("report allocations: %v", err)
	}
}

func (c *cluster) snapshot() *state.Snapshot { return c.store.Snapshot() }

// fixedCfg is a scheduler configuration with a fixed seed and clock.
func fixedCfg() Config {
	return Config{Seed: 42, Now: func() int64 { return 1_000_000 }}
}

// placeAll runs selectNode and planPlace for count allocations of the
// job's first group, as the generic scheduler does, and returns the
// placements (fewer when nodes ran out).
func placeAll(ec *evalContext, st *stack, job *droverv1.Job, count int) []*droverv1.Allocation {
	tg := job.GetTaskGroups()[0]
	var out []*droverv1.Allocation
	for i := range count {
		rn := st.selectNode(tg, selectOptions{allocName: fmt.Sprintf("%s.%s[%d]", job.GetId(), tg.GetName(), i)})
		if rn == nil {
			break
		}
		a := &droverv1.Allocation{
			Id:            uuid.NewString(),
			EvalId:        ec.eval.GetId(),
			Name:          fmt.Sprintf("%s.%s[%d]", job.GetId(), tg.GetName(), i),
			NodeId:        rn.node.GetId(),
			JobId:         job.GetId(),
			JobVersion:    job.GetVersion(),
			TaskGroup:     tg.GetName(),
			Resources:     rn.resources,
			DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN,
			ClientStatus:  droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING,
			Score:         rn.score,
		}
		ec.planPlace(a)
		out = append(out, a)
	}
	return out
}

// perNode counts allocations by node id.
func perNode(allocs []*droverv1.Allocation) map[string]int {
	out := make(map[string]int)
	for _, a := range allocs {
		out[a.GetNodeId()]++
	}
	return out
}

func TestNewEvalContextPlan(t *testing.T) {
	c := newCluster(t)
	c.addNodes(1, nil)
	job, ev := c.register(testJob(1))
	snap := c.snapshot()
	ec := newEvalContext(snap, fixedCfg(), ev, job)
	p := ec.plan()
	if p.GetEvalId() != ev.GetId() || p.GetJobId() != job.GetId() || p.GetPriority() != job.GetPriority() || p.GetSnapshotIndex() != snap.Index() {
		t.Fatalf("plan header = %v, want eval %s job %s priority %d index %d", p, ev.GetId(), job.GetId(), job.GetPriority(), snap.Index())
	}
	if len(p.GetNodePlans()) != 0 {
		t.Fatalf("new plan has node plans: %v", p.GetNodePlans())
	}
	if got := ec.now(); got != 1_000_000 {
		t.Fatalf("now = %d, want the configured clock", got)
	}
}

// TestProposedAllocs checks which allocations hold resources on a node
// once the plan is applied (DESIGN 6: only client-terminal ones are free).
func TestProposedAllocs(t *testing.T) {
	c := newCluster(t)
	nodes := c.addNodes(1, nil)
	node := nodes[0]
	job, ev := c.register(testJob(5))
	running := runningAlloc(job, node, nil)
	stopping := runningAlloc(job, node, nil)
	lost := runningAlloc(job, node, nil)
	complete := runningAlloc(job, node, nil)
	updated := runningAlloc(job, node, nil)
	c.place(running, stopping, lost, complete, updated)
	c.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, complete.GetId())
	c.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, running.GetId(), stopping.GetId(), lost.GetId(), updated.GetId())
	snap := c.snapshot()

	ec := newEvalContext(snap, fixedCfg(), ev, job)
	ec.planStop(snap.AllocByID(stopping.GetId()), droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, "scale down",
		droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED, "")
	ec.planStop(snap.AllocByID(lost.GetId()), droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, "node down",
		droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST, "")
	upd := snap.AllocByID(updated.GetId()).CloneVT()
	upd.Resources.CpuMhz = 1500
	ec.planUpdate(upd)
	placed := runningAlloc(job, node, nil)
	ec.planPlace(placed)

	got := ec.proposedAllocs(node.GetId())
	var ids []string
	for _, a := range got {
		ids = append(ids, a.GetId())
	}
	want := []string{running.GetId(), stopping.GetId(), updated.GetId(), placed.GetId()}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("proposed = %v, want running, stopping, updated, placed %v", ids, want)
	}
	for _, a := range got {
		if a.GetId() == updated.GetId() && a.GetResources().GetCpuMhz() != 1500 {
			t.Fatalf("proposed holds the original of the updated allocation, not its copy")
		}
	}
	u := ec.usageOf(ec.lookupNode(node))
	if u.CPU != 1000+1000+1500+1000 {
		t.Fatalf("usage cpu = %d, want 4500", u.CPU)
	}
	np := ec.plan().GetNodePlans()
	if len(np) != 1 || len(np[0].GetStops()) != 2 || len(np[0].GetAllocations()) != 2 {
		t.Fatalf("plan = %v, want one node plan with 2 stops and 2 allocations", np)
	}
	if s := np[0].GetStops()[1]; s.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST || s.GetDesiredDescription() != "node down" {
		t.Fatalf("lost stop = %v", s)
	}
}

// TestUsageFollowsPlan checks that the cached usage of a node moves with
// placements and is rebuilt after a lost stop.
func TestUsageFollowsPlan(t *testing.T) {
	c := newCluster(t)
	node := c.addNodes(1, nil)[0]
	job, ev := c.register(testJob(2))
	old := runningAlloc(job, node, nil)
	c.place(old)
	snap := c.snapshot()
	ec := newEvalContext(snap, fixedCfg(), ev, job)
	ns := ec.lookupNode(node)
	if got := ec.usageOf(ns).CPU; got != 1000 {
		t.Fatalf("initial usage = %d, want 1000", got)
	}
	ec.planPlace(runningAlloc(job, node, nil))
	if got := ec.usageOf(ns).CPU; got != 2000 {
		t.Fatalf("usage after placement = %d, want 2000", got)
	}
	ec.planStop(snap.AllocByID(old.GetId()), droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, "", droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED, "")
	if got := ec.usageOf(ns).CPU; got != 2000 {
		t.Fatalf("usage after a desired stop = %d, want 2000: the allocation may still run", got)
	}
	ec.planStop(snap.AllocByID(old.GetId()), droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, "", droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST, "")
	if got := ec.usageOf(ns).CPU; got != 1000 {
		t.Fatalf("usage after a lost stop = %d, want 1000", got)
	}
}
