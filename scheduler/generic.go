package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Plan attempts before an evaluation gives up: each attempt whose plan was
// partly rejected without any progress counts (reference 4.6).
const (
	maxServiceAttempts = 5
	maxBatchAttempts   = 2
)

// New returns the scheduler for a job type.
func New(typ droverv1.JobType, st State, planner Planner, cfg Config) (Scheduler, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch typ {
	case droverv1.JobType_JOB_TYPE_SERVICE:
		return &genericScheduler{state: st, planner: planner, cfg: cfg, attempts: maxServiceAttempts}, nil
	case droverv1.JobType_JOB_TYPE_BATCH:
		return &genericScheduler{state: st, planner: planner, cfg: cfg, attempts: maxBatchAttempts, batch: true}, nil
	case droverv1.JobType_JOB_TYPE_SYSTEM:
		return &genericScheduler{state: st, planner: planner, cfg: cfg, attempts: maxServiceAttempts, system: true}, nil
	}
	return nil, fmt.Errorf("no scheduler for job type %s", typ)
}

// genericScheduler schedules service, batch and system jobs. The three
// differ only in how a pass decides what to place (reconcile for service
// and batch, one allocation per eligible node for system) and in how many
// attempts a pass gets; the plan, retry and evaluation bookkeeping is one.
type genericScheduler struct {
	state    State
	planner  Planner
	cfg      Config
	attempts int
	batch    bool
	system   bool
}

// passOutcome is what one scheduling pass left to report.
type passOutcome struct {
	// failures per task group, for groups with allocations left unplaced.
	failures []*droverv1.PlacementFailure
	queued   map[string]int32
	// classes and escaped describe feasibility for a blocked evaluation.
	classes map[string]bool
	escaped bool
	// evalWritten: the plan's entry carried the evaluation's outcome, so
	// there is none left to write.
	evalWritten bool
}

func (o *passOutcome) unplaced() bool { return len(o.failures) > 0 }

// errRetryPlan means a pass's plan was partly rejected: plan again on the
// refreshed state.
var errRetryPlan = errors.New("plan partly rejected")

// Process runs passes until a plan commits in full, then writes the
// evaluation's outcome.
func (g *genericScheduler) Process(ctx context.Context, eval *droverv1.Evaluation) error {
	var (
		out      *passOutcome
		failures int
	)
	for {
		var progress bool
		var err error
		out, progress, err = g.pass(ctx, eval)
		if err == nil {
			break
		}
		if !errors.Is(err, errRetryPlan) {
			return err
		}
		if progress {
			failures = 0
		} else {
			failures++
		}
		if failures >= g.attempts {
			return g.giveUp(ctx, eval)
		}
	}
	return g.finish(ctx, eval, out)
}

// pass reconciles the job against the current state, places what it must
// and submits the plan. progress says whether a rejected plan still
// committed something.
func (g *genericScheduler) pass(ctx context.Context, eval *droverv1.Evaluation) (*passOutcome, bool, error) {
	job := g.state.JobByID(eval.GetJobId())
	ec := newEvalContext(g.state, g.cfg, eval, job)
	var res *reconcileResult
	if g.system {
		res = g.reconcileSystem(ec, eval, job)
	} else {
		res = g.reconcileService(ec, eval, job)
	}
	for _, f := range res.followupEvals {
		if err := g.planner.CreateEval(ctx, f); err != nil {
			return nil, false, fmt.Errorf("create follow-up evaluation %s of %s: %w", f.GetId(), eval.GetId(), err)
		}
	}
	applyChanges(ec, res)
	out := &passOutcome{}
	if len(res.place) > 0 {
		out = place(ec, job, eval, res.place)
	}
	ec.attachAlternates()
	plan := ec.plan()
	plan.DesiredUpdates = res.desiredUpdates()
	plan.Deployment, plan.DeploymentUpdates = res.deployment, res.deploymentUpdates
	if len(plan.GetNodePlans()) == 0 && plan.Deployment == nil && len(plan.DeploymentUpdates) == 0 && !g.cfg.SubmitEmptyPlans {
		return out, false, nil
	}
	if !out.unplaced() {
		// Should the plan commit in full, the evaluation is complete: the
		// plan's raft entry can say so, one write fewer per evaluation.
		plan.EvalUpdate = g.completed(eval, out)
	}
	result, refreshed, err := g.planner.SubmitPlan(ctx, plan)
	if err != nil {
		return nil, false, fmt.Errorf("submit plan of evaluation %s: %w", eval.GetId(), err)
	}
	if refreshed != nil {
		g.state = refreshed
		return nil, committedAny(result), errRetryPlan
	}
	if len(result.GetRejectedNodeIds()) > 0 {
		return nil, false, fmt.Errorf("plan of evaluation %s: %d nodes rejected without a state to refresh to", eval.GetId(), len(result.GetRejectedNodeIds()))
	}
	out.evalWritten = plan.EvalUpdate != nil && result.GetEvalUpdated()
	return out, true, nil
}

// committedAny reports whether the applier committed part of the plan: a
// leader that left the node plans out of its answer counts them, one
// before committed_nodes existed always sends them.
func committedAny(r *droverv1.PlanResult) bool {
	return r.GetCommittedNodes() > 0 || len(r.GetNodePlans()) > 0
}

// reconcileService decides placements, stops and updates of a service or
// batch job.
func (g *genericScheduler) reconcileService(ec *evalContext, eval *droverv1.Evaluation, job *droverv1.Job) *reconcileResult {
	allocs, _ := g.state.AllocsByJob(eval.GetJobId())
	nodes := make(map[string]*droverv1.Node)
	for _, a := range allocs {
		if _, ok := nodes[a.GetNodeId()]; !ok {
			nodes[a.GetNodeId()] = g.state.NodeByID(a.GetNodeId())
		}
	}
	return reconcile(reconcileInput{
		job:             job,
		jobVersion:      func(v uint64) *droverv1.Job { return g.state.JobVersion(eval.GetJobId(), v) },
		allocs:          allocs,
		nodes:           nodes,
		evalID:          eval.GetId(),
		evalTriggeredBy: eval.GetTriggeredBy(),
		evalByID:        g.state.EvalByID,
		now:             ec.now(),
		deployment:      g.state.LatestDeployment(eval.GetJobId()),
		deployments:     g.cfg.Deployments != nil && g.cfg.Deployments(),
		newDeploymentID: uuid.NewString,
		evalPriority:    eval.GetPriority(),
	})
}

// applyChanges writes the reconciler's stops and updates into the plan.
func applyChanges(ec *evalContext, res *reconcileResult) {
	for _, s := range res.stop {
		ec.planStop(s.alloc, s.desired, s.description, s.clientStatus, s.followup.GetFollowupEvalId())
	}
	for _, a := range res.inplace {
		ec.planUpdate(a)
	}
	for _, a := range res.attributeUpdates {
		ec.planUpdate(a)
	}
	for _, d := range res.destructive {
		if d.surge {
			res.place = append(res.place, d.place)
			continue
		}
		ec.planStop(d.stop.alloc, d.stop.desired, d.stop.description, d.stop.clientStatus, d.stop.followup.GetFollowupEvalId())
		p := d.place
		p.keepPrevious = true
		res.place = append(res.place, p)
	}
}

// place picks a node for each placement and adds the new allocations to
// the plan; what finds no node is counted per task group.
func place(ec *evalContext, job *droverv1.Job, eval *droverv1.Evaluation, placements []placement) *passOutcome {
	out := &passOutcome{}
	st := newStack(ec, job)
	unplaced := make(map[string]int32)
	var order []*droverv1.TaskGroup
	for _, p := range placements {
		rn, counts := selectFor(ec, st, p)
		if rn != nil {
			a := newAlloc(ec, job, eval, p, rn)
			ec.planPlace(a)
			ec.planAlternates(a, rn.alternates)
			continue
		}
		if p.keepPrevious && !fitsOnceGone(ec, st, p) {
			// An update that no node takes, even once the allocation it
			// replaces has gone, takes nothing away. One that waits for
			// what that allocation holds (its static port, its room on a
			// full node) keeps the stop and is placed once it is gone.
			ec.unplanStop(p.previous)
		}
		if !counts {
			continue
		}
		if _, seen := unplaced[p.group.GetName()]; !seen {
			order = append(order, p.group)
		}
		unplaced[p.group.GetName()]++
	}
	for _, tg := range order {
		f := st.failure(tg)
		f.Unplaced = unplaced[tg.GetName()]
		out.failures = append(out.failures, f)
	}
	if len(out.failures) > 0 {
		out.queued = unplaced
		out.classes, out.escaped = st.classEligibility()
	}
	return out
}

// selectFor picks the node for one placement. A placement pinned to a node
// (a system job's) looks at that node only; when the node is filtered out
// by the job's constraints rather than short of resources, nothing is
// owed there, and counts is false.
func selectFor(ec *evalContext, st *stack, p placement) (rn *rankedNode, counts bool) {
	opts := selectOptions{allocName: p.name}
	if p.previous != nil && p.reschedule {
		opts.penaltyNodes = map[string]struct{}{p.previous.GetNodeId(): {}}
	}
	if p.node == "" {
		return st.selectNode(p.group, opts), true
	}
	n := ec.state.NodeByID(p.node)
	if n == nil {
		return nil, false
	}
	st.setNodes([]*droverv1.Node{n})
	defer st.setNodes(nil)
	return st.selectPinned(p.group, opts)
}

// fitsOnceGone reports whether a replacement would fit on the node of the
// allocation it replaces once that allocation no longer holds anything.
func fitsOnceGone(ec *evalContext, st *stack, p placement) bool {
	n := ec.state.NodeByID(p.previous.GetNodeId())
	if n == nil {
		return false
	}
	release := ec.releaseFor(p.previous)
	defer release()
	return st.fitsAlone(p.group, n, selectOptions{allocName: p.name})
}

// newAlloc builds the allocation for a placement on the chosen node.
func newAlloc(ec *evalContext, job *droverv1.Job, eval *droverv1.Evaluation, p placement, rn *rankedNode) *droverv1.Allocation {
	a := &droverv1.Allocation{
		Id:            droverv1.NewAllocationID(time.Unix(0, ec.now())),
		EvalId:        eval.GetId(),
		Name:          p.name,
		NodeId:        rn.node.GetId(),
		JobId:         job.GetId(),
		JobVersion:    job.GetVersion(),
		TaskGroup:     p.group.GetName(),
		Resources:     rn.resources,
		DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN,
		ClientStatus:  droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING,
		Score:         rn.score,
		DeploymentId:  p.deploymentID,
	}
	if p.canary {
		a.DeploymentStatus = &droverv1.AllocDeploymentStatus{Canary: true}
	}
	if p.previous != nil {
		a.PreviousAllocation = p.previous.GetId()
		if p.reschedule {
			a.RescheduleTracker = rescheduleTracker(p.previous, ec.now(), p.delay)
		}
	}
	return a
}

// finish writes the evaluation's outcome: complete, with a blocked
// evaluation left behind when something could not be placed; a blocked
// evaluation that still cannot place goes back to the blocked set.
func (g *genericScheduler) finish(ctx context.Context, eval *droverv1.Evaluation, out *passOutcome) error {
	if out.evalWritten {
		return nil
	}
	if out.unplaced() && eval.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_BLOCKED {
		again := g.outcome(eval, out)
		again.ClassEligibility, again.EscapedComputedClass = out.classes, out.escaped
		return g.planner.ReblockEval(ctx, again)
	}
	done := g.completed(eval, out)
	if out.unplaced() {
		blocked := g.blockedEval(eval, out, droverv1.EvalTrigger_EVAL_TRIGGER_QUEUED_ALLOCS)
		if err := g.planner.CreateEval(ctx, blocked); err != nil {
			return fmt.Errorf("create blocked evaluation for %s: %w", eval.GetId(), err)
		}
		done.BlockedEval = blocked.GetId()
	}
	return g.planner.UpdateEval(ctx, done)
}

// outcome is the evaluation with what a pass that ended with out found.
func (g *genericScheduler) outcome(eval *droverv1.Evaluation, out *passOutcome) *droverv1.Evaluation {
	ev := eval.CloneVT()
	ev.PlacementFailures = out.failures
	ev.QueuedAllocations = out.queued
	ev.SnapshotIndex = g.state.Index()
	ev.ModifyTime = g.now()
	return ev
}

// completed is the evaluation completed by a pass that ended with out.
func (g *genericScheduler) completed(eval *droverv1.Evaluation, out *passOutcome) *droverv1.Evaluation {
	done := g.outcome(eval, out)
	done.Status = droverv1.EvalStatus_EVAL_STATUS_COMPLETE
	done.StatusDescription = ""
	return done
}

// giveUp ends an evaluation whose plans kept being rejected: it fails, and
// a blocked evaluation takes over so that the job is retried when the
// cluster changes.
func (g *genericScheduler) giveUp(ctx context.Context, eval *droverv1.Evaluation) error {
	blocked := g.blockedEval(eval, &passOutcome{escaped: true}, droverv1.EvalTrigger_EVAL_TRIGGER_MAX_PLANS)
	if err := g.planner.CreateEval(ctx, blocked); err != nil {
		return fmt.Errorf("create blocked evaluation for %s: %w", eval.GetId(), err)
	}
	failed := eval.CloneVT()
	failed.Status = droverv1.EvalStatus_EVAL_STATUS_FAILED
	failed.StatusDescription = fmt.Sprintf("gave up after %d plan attempts without progress", g.attempts)
	failed.BlockedEval = blocked.GetId()
	failed.SnapshotIndex = g.state.Index()
	failed.ModifyTime = g.now()
	return g.planner.UpdateEval(ctx, failed)
}

func (g *genericScheduler) blockedEval(eval *droverv1.Evaluation, out *passOutcome, trigger droverv1.EvalTrigger) *droverv1.Evaluation {
	now := g.now()
	return &droverv1.Evaluation{
		Id:                   uuid.NewString(),
		Priority:             eval.GetPriority(),
		Type:                 eval.GetType(),
		TriggeredBy:          trigger,
		JobId:                eval.GetJobId(),
		Status:               droverv1.EvalStatus_EVAL_STATUS_BLOCKED,
		StatusDescription:    "waiting for capacity to place remaining allocations",
		PreviousEval:         eval.GetId(),
		QueuedAllocations:    out.queued,
		ClassEligibility:     out.classes,
		EscapedComputedClass: out.escaped,
		SnapshotIndex:        g.state.Index(),
		CreateTime:           now,
		ModifyTime:           now,
	}
}

func (g *genericScheduler) now() int64 {
	if g.cfg.Now != nil {
		return g.cfg.Now()
	}
	return time.Now().UnixNano()
}
