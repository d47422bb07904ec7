package scheduler

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/internal/invariant"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Tests of Process drive a scheduler made by New against a real state
// store, through a fake planner that commits plans and evaluations to that
// store the way the leader would.

// procStart is the clock when a process test begins: fixed, so that
// reschedule delays and follow-up evaluations can be checked exactly.
const procStart = int64(1_700_000_000) * int64(time.Second)

// processTimeout bounds one call of Process.
const processTimeout = 10 * time.Second

// fakePlanner is the Planner of process tests. It commits each plan through
// UpsertPlanResults and each evaluation through UpsertEvals, checks the
// safety invariants after every commit, and records what it was handed.
type fakePlanner struct {
	c   *cluster
	now func() int64
	// reject, when set, says whether the node plan at position i of the
	// call-th plan (from 0) is dropped, as the plan applier drops a node
	// whose part no longer fits. It may write to the store, standing for
	// the plan of another worker that got there first.
	reject func(call, i int, np *droverv1.NodePlan) bool
	// carryEvals: a plan of which no node plan is dropped commits its
	// eval_update with it and says so, as the plan applier does; unset,
	// the planner ignores eval_update, as a leader of an older release.
	carryEvals bool

	plans     []*droverv1.Plan
	results   []*droverv1.PlanResult
	updated   []*droverv1.Evaluation
	created   []*droverv1.Evaluation
	reblocked []*droverv1.Evaluation
}

var _ Planner = (*fakePlanner)(nil)

// SubmitPlan commits the plan but for the rejected node plans, in one
// entry. After a rejection it returns a snapshot at least as new as the
// commit, as the worker does once its state reaches the refresh index.
func (p *fakePlanner) SubmitPlan(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, State, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("submit plan of eval %s: %w", plan.GetEvalId(), err)
	}
	call := len(p.plans)
	p.plans = append(p.plans, plan.CloneVT())
	p.checkPlacedOnReadyNodes(plan)
	entry := &droverv1.PlanResultEntry{EvalId: plan.GetEvalId(), AppliedAt: p.now()}
	res := &droverv1.PlanResult{}
	for i, np := range plan.GetNodePlans() {
		if p.reject != nil && p.reject(call, i, np) {
			res.RejectedNodeIds = append(res.RejectedNodeIds, np.GetNodeId())
			continue
		}
		res.NodePlans = append(res.NodePlans, np.CloneVT())
		for _, a := range np.GetAllocations() {
			entry.Allocations = append(entry.Allocations, a.CloneVT())
		}
		for _, s := range np.GetStops() {
			entry.Stops = append(entry.Stops, s.CloneVT())
		}
	}
	if ev := plan.GetEvalUpdate(); p.carryEvals && ev != nil && len(res.GetRejectedNodeIds()) == 0 {
		entry.Evals = []*droverv1.Evaluation{ev.CloneVT()}
		res.EvalUpdated = true
	}
	p.results = append(p.results, res)
	if len(entry.GetAllocations()) > 0 || len(entry.GetStops()) > 0 || len(entry.GetEvals()) > 0 {
		index := p.c.next()
		if _, err := p.c.store.UpsertPlanResults(index, entry); err != nil {
			return nil, nil, fmt.Errorf("commit plan of eval %s: %w", plan.GetEvalId(), err)
		}
		res.AllocIndex = index
		p.c.checkInvariants()
	}
	if len(res.GetRejectedNodeIds()) == 0 {
		return res, nil, nil
	}
	snap := p.c.snapshot()
	res.RefreshIndex = snap.Index()
	return res, snap, nil
}

// checkPlacedOnReadyNodes fails the test for a new allocation on a node
// that takes no new work, which the plan applier would refuse.
func (p *fakePlanner) checkPlacedOnReadyNodes(plan *droverv1.Plan) {
	p.c.t.Helper()
	snap := p.c.snapshot()
	for _, np := range plan.GetNodePlans() {
		for _, a := range np.GetAllocations() {
			if snap.AllocByID(a.GetId()) != nil {
				continue
			}
			if r := nodeUnavailable(snap.NodeByID(a.GetNodeId())); r != "" {
				p.c.t.Errorf("plan of eval %s places %s on node %s, which is %s", plan.GetEvalId(), a.GetName(), a.GetNodeId(), r)
			}
		}
	}
}

// UpdateEval writes the outcome of an existing evaluation.
func (p *fakePlanner) UpdateEval(_ context.Context, ev *droverv1.Evaluation) error {
	if p.c.snapshot().EvalByID(ev.GetId()) == nil {
		return fmt.Errorf("update eval %s: not in the state", ev.GetId())
	}
	p.updated = append(p.updated, ev.CloneVT())
	return p.writeEval(ev)
}

// CreateEval writes a new evaluation, which must follow up an existing one.
func (p *fakePlanner) CreateEval(_ context.Context, ev *droverv1.Evaluation) error {
	snap := p.c.snapshot()
	if snap.EvalByID(ev.GetId()) != nil {
		return fmt.Errorf("create eval %s: already exists", ev.GetId())
	}
	if snap.EvalByID(ev.GetPreviousEval()) == nil {
		return fmt.Errorf("create eval %s: previous eval %q not in the state", ev.GetId(), ev.GetPreviousEval())
	}
	p.created = append(p.created, ev.CloneVT())
	return p.writeEval(ev)
}

// ReblockEval records a blocked evaluation put back; like the leader, it
// writes nothing.
func (p *fakePlanner) ReblockEval(_ context.Context, ev *droverv1.Evaluation) error {
	if s := p.c.snapshot().EvalByID(ev.GetId()); s.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_BLOCKED {
		return fmt.Errorf("reblock eval %s: stored status %s", ev.GetId(), s.GetStatus())
	}
	p.reblocked = append(p.reblocked, ev.CloneVT())
	return nil
}

func (p *fakePlanner) writeEval(ev *droverv1.Evaluation) error {
	e := &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{ev.CloneVT()}}
	if _, err := p.c.store.UpsertEvals(p.c.next(), e); err != nil {
		return fmt.Errorf("write eval %s: %w", ev.GetId(), err)
	}
	return nil
}

// reset forgets what was recorded, keeping the reject hook.
func (p *fakePlanner) reset() {
	p.plans, p.results, p.updated, p.created, p.reblocked = nil, nil, nil, nil, nil
}

// checkInvariants fails the test for every safety violation in the state.
func (c *cluster) checkInvariants() {
	c.t.Helper()
	for _, err := range invariant.Check(c.snapshot()) {
		c.t.Errorf("invariant: %v", err)
	}
}

// harness is a cluster with a fake planner and a clock the test moves.
type harness struct {
	*cluster
	planner *fakePlanner
	now     int64
	cfg     Config
}

func newHarness(t *testing.T) *harness {
	h := &harness{cluster: newCluster(t), now: procStart}
	h.cfg = fixedCfg()
	h.cfg.Now = h.clock
	h.cfg.AllocCIDR = netip.MustParsePrefix("10.10.0.0/16")
	h.planner = &fakePlanner{c: h.cluster, now: h.clock}
	return h
}

func (h *harness) clock() int64 { return h.now }

// process runs the scheduler of the evaluation's type on the newest state,
// fails the test if it returns an error, and checks the invariants.
func (h *harness) process(ev *droverv1.Evaluation) {
	h.t.Helper()
	s, err := New(ev.GetType(), h.snapshot(), h.planner, h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	defer cancel()
	if err := s.Process(ctx, ev); err != nil {
		h.t.Fatalf("process eval %s: %v", ev.GetId(), err)
	}
	h.checkInvariants()
}

// runJob registers the job, processes its evaluation, and marks what was
// placed running, as agents would; it returns the job as stored.
func (h *harness) runJob(j *droverv1.Job) *droverv1.Job {
	h.t.Helper()
	job, ev := h.register(j)
	h.process(ev)
	h.markRunning(job.GetId())
	return job
}

// typedJob is testJob of the given type, with that type's defaults.
func typedJob(typ droverv1.JobType, count int32) *droverv1.Job {
	j := testJob(count)
	j.Type = typ
	for _, tg := range j.GetTaskGroups() {
		tg.ReschedulePolicy = nil
	}
	j.Canonicalize()
	return j
}

// newEval writes a pending evaluation of the job and returns it as stored.
func (h *harness) newEval(job *droverv1.Job, trigger droverv1.EvalTrigger) *droverv1.Evaluation {
	h.t.Helper()
	ev := &droverv1.Evaluation{
		Id: uuid.NewString(), Priority: job.GetPriority(), Type: job.GetType(), JobId: job.GetId(),
		TriggeredBy: trigger, Status: droverv1.EvalStatus_EVAL_STATUS_PENDING, CreateTime: h.now,
	}
	if _, err := h.store.UpsertEvals(h.next(), &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{ev}}); err != nil {
		h.t.Fatalf("write eval of job %s: %v", job.GetId(), err)
	}
	return h.snapshot().EvalByID(ev.GetId())
}

// deregister stops the job and returns its evaluation.
func (h *harness) deregister(job *droverv1.Job) *droverv1.Evaluation {
	h.t.Helper()
	ev := &droverv1.Evaluation{
		Id: uuid.NewString(), Priority: job.GetPriority(), Type: job.GetType(), JobId: job.GetId(),
		TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER, Status: droverv1.EvalStatus_EVAL_STATUS_PENDING,
	}
	e := &droverv1.JobDeregisterEntry{JobId: job.GetId(), Eval: ev, DeregisteredAt: h.now}
	if _, _, err := h.store.DeregisterJob(h.next(), e); err != nil {
		h.t.Fatalf("deregister job %s: %v", job.GetId(), err)
	}
	return h.snapshot().EvalByID(ev.GetId())
}

// setNodeStatus records a node's new status.
func (h *harness) setNodeStatus(nodeID string, status droverv1.NodeStatus) {
	h.t.Helper()
	e := &droverv1.NodeStatusEntry{NodeId: nodeID, Status: status, UpdatedAt: h.now}
	if _, err := h.store.UpdateNodeStatus(h.next(), e); err != nil {
		h.t.Fatalf("set node %s %s: %v", nodeID, status, err)
	}
}

// reportAt records agents' reports of client status made at a given time,
// which a failed allocation's reschedule delay counts from.
func (h *harness) reportAt(at int64, status droverv1.AllocClientStatus, allocs ...*droverv1.Allocation) {
	h.t.Helper()
	byNode := make(map[string]*droverv1.NodeAllocUpdates)
	e := &droverv1.AllocClientUpdateEntry{UpdatedAt: at}
	for _, a := range allocs {
		g := byNode[a.GetNodeId()]
		if g == nil {
			g = &droverv1.NodeAllocUpdates{NodeId: a.GetNodeId()}
			byNode[a.GetNodeId()] = g
			e.Nodes = append(e.Nodes, g)
		}
		g.Allocs = append(g.Allocs, &droverv1.AllocClientUpdate{AllocId: a.GetId(), ClientStatus: status})
	}
	if _, _, err := h.store.UpdateAllocsFromClient(h.next(), e); err != nil {
		h.t.Fatalf("report allocations %s: %v", status, err)
	}
}

// markRunning reports the job's pending allocations running.
func (h *harness) markRunning(jobID string) {
	h.t.Helper()
	var pending []*droverv1.Allocation
	for _, a := range h.live(jobID) {
		if a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING {
			pending = append(pending, a)
		}
	}
	if len(pending) > 0 {
		h.reportAt(h.now, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, pending...)
	}
}

// live returns the job's allocations the servers want running and that
// have not ended on their node.
func (h *harness) live(jobID string) []*droverv1.Allocation {
	allocs, _ := h.snapshot().AllocsByJob(jobID)
	return slices.DeleteFunc(allocs, func(a *droverv1.Allocation) bool {
		return a.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN || a.ClientTerminal()
	})
}

// allocsOf returns all of the job's allocations, terminal ones included.
func (h *harness) allocsOf(jobID string) []*droverv1.Allocation {
	allocs, _ := h.snapshot().AllocsByJob(jobID)
	return allocs
}

// evalOf returns an evaluation as stored.
func (h *harness) evalOf(id string) *droverv1.Evaluation { return h.snapshot().EvalByID(id) }

// checkComplete fails the test unless the evaluation is complete and, as
// wantBlocked says, did or did not leave a blocked evaluation; it returns
// the stored evaluation and its blocked one (nil if none).
func (h *harness) checkComplete(evalID string, wantBlocked bool) (done, blocked *droverv1.Evaluation) {
	h.t.Helper()
	done = h.evalOf(evalID)
	if done.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE {
		h.t.Fatalf("eval %s status = %s (%s), want complete", evalID, done.GetStatus(), done.GetStatusDescription())
	}
	if got := done.GetBlockedEval() != ""; got != wantBlocked {
		h.t.Fatalf("eval %s blocked eval = %q, want one: %v (failures %v)", evalID, done.GetBlockedEval(), wantBlocked, done.GetPlacementFailures())
	}
	if !wantBlocked {
		if len(done.GetPlacementFailures()) > 0 {
			h.t.Fatalf("eval %s placement failures = %v, want none", evalID, done.GetPlacementFailures())
		}
		return done, nil
	}
	blocked = h.evalOf(done.GetBlockedEval())
	if blocked.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_BLOCKED || blocked.GetPreviousEval() != evalID ||
		blocked.GetJobId() != done.GetJobId() || blocked.GetType() != done.GetType() {
		h.t.Fatalf("blocked eval = %v, want a blocked eval of job %s following %s", blocked, done.GetJobId(), evalID)
	}
	return done, blocked
}

// namesOf returns the allocations' names, sorted.
func namesOf(allocs []*droverv1.Allocation) []string {
	out := make([]string, 0, len(allocs))
	for _, a := range allocs {
		out = append(out, a.GetName())
	}
	slices.Sort(out)
	return out
}

// idsOf returns the allocations' ids, sorted.
func idsOf(allocs []*droverv1.Allocation) []string {
	out := make([]string, 0, len(allocs))
	for _, a := range allocs {
		out = append(out, a.GetId())
	}
	slices.Sort(out)
	return out
}

// namesUpTo returns the names of a group's allocations 0 to n-1, sorted.
func namesUpTo(job *droverv1.Job, n int) []string {
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, allocName(job.GetId(), job.GetTaskGroups()[0].GetName(), i))
	}
	slices.Sort(out)
	return out
}
