package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/droverhq/drover/internal/backoff"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// evalPlanner is the scheduler.Planner a worker hands the scheduler of one
// evaluation: it carries the evaluation's token to the leader and stamps
// the index of the state the scheduler works from.
type evalPlanner struct {
	w     *worker
	eval  *droverv1.Evaluation
	token string

	mu            sync.Mutex
	snapshotIndex uint64 // of the state the scheduler works from
	allocIndex    uint64 // of the last committed plan
}

var _ scheduler.Planner = (*evalPlanner)(nil)

func newEvalPlanner(w *worker, ev *droverv1.Evaluation, token string, snapshotIndex uint64) *evalPlanner {
	return &evalPlanner{w: w, eval: ev, token: token, snapshotIndex: snapshotIndex}
}

// SubmitPlan stamps the plan (in place: the scheduler made it) with the
// token and snapshot index and submits it, retrying retryable errors with
// backoff. After a partial commit it waits for the local state at the
// refresh index (and the committed part's index) and returns that state.
func (p *evalPlanner) SubmitPlan(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, scheduler.State, error) {
	what := fmt.Sprintf("submit plan for eval %s", p.eval.GetId())
	if p.w.ctx.Err() != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, ErrShuttingDown)
	}
	if plan.EvalId == "" {
		plan.EvalId = p.eval.GetId()
	}
	plan.EvalToken = p.token
	plan.SnapshotIndex = p.snapshot()
	if ev := plan.GetEvalUpdate(); ev != nil {
		// As UpdateEval stamps the outcome it writes.
		ev.SnapshotIndex = plan.SnapshotIndex
	}
	defer p.w.setStatus(StatusScheduling)
	res, err := p.submit(ctx, plan)
	if err != nil {
		return nil, nil, p.w.ended(what, err)
	}
	p.committed(res.GetAllocIndex())
	if res.GetRefreshIndex() == 0 {
		return res, nil, nil
	}
	p.w.setStatus(StatusWaitingForState)
	st, err := p.w.snapshotAt(ctx, max(res.GetRefreshIndex(), res.GetAllocIndex()))
	if err != nil {
		return nil, nil, fmt.Errorf("refresh after partial commit of plan for eval %s: %w", p.eval.GetId(), err)
	}
	p.mu.Lock()
	p.snapshotIndex = st.Index()
	p.mu.Unlock()
	return res, st, nil
}

// submit calls the leader until it answers or fails with an error that is
// not retryable (IsRetryable). There is no attempt limit: the broker
// redelivers an evaluation held too long, and the token check then ends
// this one.
func (p *evalPlanner) submit(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, error) {
	cfg := p.w.cfg
	retry := backoff.Policy{Initial: cfg.SubmitBackoffBase, Max: cfg.SubmitBackoffLimit}.New()
	for attempt := 0; ; attempt++ {
		p.w.setStatus(StatusSubmitting)
		start := time.Now()
		res, err := p.w.pool.leader.SubmitPlan(ctx, plan)
		p.w.cfg.Observer.PlanSubmitted(time.Since(start), err)
		if err == nil && res == nil {
			err = fmt.Errorf("leader returned no plan result")
		}
		if err == nil || !IsRetryable(err) || ctx.Err() != nil {
			return res, err
		}
		d := retry.Next(0)
		p.w.log.Debug("plan submission failed, retrying", "eval_id", p.eval.GetId(), "attempt", attempt+1, "in", d, "error", err)
		p.w.setStatus(StatusBackoff)
		if err := backoff.Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// UpdateEval writes the new status of the evaluation being processed.
func (p *evalPlanner) UpdateEval(ctx context.Context, ev *droverv1.Evaluation) error {
	ev = p.stamp(ev)
	if err := p.w.pool.leader.UpdateEval(ctx, ev, p.token); err != nil {
		return p.w.ended(fmt.Sprintf("update eval %s", ev.GetId()), err)
	}
	return nil
}

// CreateEval writes a new evaluation (blocked or follow-up) of the job.
func (p *evalPlanner) CreateEval(ctx context.Context, ev *droverv1.Evaluation) error {
	ev = p.stamp(ev)
	if err := p.w.pool.leader.CreateEval(ctx, ev, p.token); err != nil {
		return p.w.ended(fmt.Sprintf("create eval %s (from eval %s)", ev.GetId(), p.eval.GetId()), err)
	}
	return nil
}

// ReblockEval puts the blocked evaluation being processed back.
func (p *evalPlanner) ReblockEval(ctx context.Context, ev *droverv1.Evaluation) error {
	ev = p.stamp(ev)
	if err := p.w.pool.leader.ReblockEval(ctx, ev, p.token); err != nil {
		return p.w.ended(fmt.Sprintf("reblock eval %s", ev.GetId()), err)
	}
	return nil
}

// stamp returns a copy of ev carrying the snapshot index.
func (p *evalPlanner) stamp(ev *droverv1.Evaluation) *droverv1.Evaluation {
	ev = ev.CloneVT()
	ev.SnapshotIndex = p.snapshot()
	return ev
}

func (p *evalPlanner) snapshot() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotIndex
}

// committed remembers the index of a committed plan.
func (p *evalPlanner) committed(index uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allocIndex = max(p.allocIndex, index)
}

// committedIndex is the index of the last plan committed for this
// evaluation, zero if none.
func (p *evalPlanner) committedIndex() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.allocIndex
}
