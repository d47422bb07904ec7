package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/blocked"
	"github.com/droverhq/drover/server/broker"
	"github.com/droverhq/drover/server/plan"
)

// Defaults of the leader's evaluation housekeeping (Nomad's values, where both have the knob).
const (
	cancelableBatchSize     = 728
	cancelableSweepInterval = 5 * time.Second
	failedFollowUpBaseline  = time.Minute
	failedFollowUpRange     = 5 * time.Minute
	failedDequeueTimeout    = time.Second
)

// scheduling is the leader's side of the scheduling path: the eval broker,
// the blocked evaluations, the plan queue and applier, and the loops that
// write the broker's housekeeping (failed and canceled evaluations) through
// raft. The components exist on every server and are enabled only while it
// leads; the FSM's hooks reach them on every server and do nothing
// elsewhere.
type scheduling struct {
	s       *Server
	broker  *broker.Broker
	blocked *blocked.Tracker
	plans   *plan.Queue
	// applier is the current term's plan applier; nil when not leading.
	mu      sync.Mutex
	applier *plan.Applier
	// ackWake nudges the cancelable sweep after an ack.
	ackWake chan struct{}
	wg      sync.WaitGroup
}

func newScheduling(s *Server) *scheduling {
	b := broker.New(s.cfg.Scheduler.Broker, s.logger.With("component", "broker"))
	return &scheduling{
		s:       s,
		broker:  b,
		blocked: blocked.New(b, s.logger.With("component", "blocked_evals")),
		plans:   plan.NewQueue(),
		ackWake: make(chan struct{}, 1),
	}
}

// The scheduling side receives the FSM's leader-side effects.
var _ fsm.Hooks = (*scheduling)(nil)

// EvalsWritten hands pending evaluations to the broker and blocked ones to
// the blocked set, and forgets a job's blocked evaluation once a newer one
// placed everything.
func (sc *scheduling) EvalsWritten(_ uint64, evals []*droverv1.Evaluation) {
	for _, ev := range evals {
		switch ev.GetStatus() {
		case droverv1.EvalStatus_EVAL_STATUS_PENDING:
			sc.broker.Enqueue(ev)
		case droverv1.EvalStatus_EVAL_STATUS_BLOCKED:
			sc.blocked.Block(ev)
		case droverv1.EvalStatus_EVAL_STATUS_COMPLETE:
			if ev.GetBlockedEval() == "" {
				sc.blocked.Untrack(ev.GetJobId())
			}
		}
	}
}

// CapacityChanged releases blocked evaluations that nodes of these classes
// may now host.
func (sc *scheduling) CapacityChanged(index uint64, classes []string) {
	for _, c := range classes {
		sc.blocked.Unblock(c, index)
	}
}

// duty is the leader duty that runs the scheduling side.
func (sc *scheduling) duty() LeaderDuty {
	return LeaderDuty{Name: "scheduling", Start: sc.start, Stop: sc.stop}
}

// start enables the components, then restores the evaluations waiting in
// the state: enabling first means an evaluation written meanwhile is
// enqueued by the FSM hook, by the restore, or by both (the broker drops
// the second).
func (sc *scheduling) start(ctx context.Context) error {
	sc.broker.SetEnabled(true)
	sc.blocked.SetEnabled(true)
	sc.plans.SetEnabled(true)
	pending, blockedN := 0, 0
	for ev := range sc.s.state.Snapshot().Evals() {
		switch ev.GetStatus() {
		case droverv1.EvalStatus_EVAL_STATUS_PENDING:
			sc.broker.Enqueue(ev)
			pending++
		case droverv1.EvalStatus_EVAL_STATUS_BLOCKED:
			sc.blocked.Block(ev)
			blockedN++
		}
	}
	sc.s.logger.Info("scheduling enabled", "pending_evals", pending, "blocked_evals", blockedN)

	applier := plan.NewApplier(plan.Config{
		Logger:    sc.s.logger.With("component", "plan_applier"),
		AllocCIDR: sc.s.cfg.Scheduler.AllocCIDR,
		Usage:     sc.s.usage,
	}, sc.plans, sc.s.state, planCommitter{sc.s})
	sc.mu.Lock()
	sc.applier = applier
	sc.mu.Unlock()
	sc.run(ctx, applier.Run)
	sc.run(ctx, sc.reapFailed)
	sc.run(ctx, sc.reapCancelable)
	sc.run(ctx, sc.pruneBlocked)
	return nil
}

func (sc *scheduling) run(ctx context.Context, loop func(context.Context)) {
	sc.wg.Add(1)
	go func() {
		defer sc.wg.Done()
		loop(ctx)
	}()
}

// stop disables everything (failing calls in flight with retryable
// errors) and waits for the loops, whose context has already ended.
func (sc *scheduling) stop() {
	sc.plans.SetEnabled(false)
	sc.blocked.SetEnabled(false)
	sc.broker.SetEnabled(false)
	sc.wg.Wait()
	sc.mu.Lock()
	sc.applier = nil
	sc.mu.Unlock()
}

// reapFailed marks evaluations past the broker's delivery limit failed and
// writes a delayed follow-up for each, so a job whose scheduling keeps
// failing is retried later rather than never or in a hot loop.
func (sc *scheduling) reapFailed(ctx context.Context) {
	limit := sc.s.cfg.Scheduler.Broker.DeliveryLimit
	for ctx.Err() == nil {
		ev, token, err := sc.broker.DequeueFailed(ctx, failedDequeueTimeout)
		if err != nil || ev == nil {
			if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
				sc.s.logger.Warn("dequeue failed evaluation", "err", err)
			}
			continue
		}
		failed := ev.CloneVT()
		failed.Status = droverv1.EvalStatus_EVAL_STATUS_FAILED
		failed.StatusDescription = fmt.Sprintf("evaluation reached delivery limit (%d)", limit)
		failed.ModifyTime = time.Now().UnixNano()
		entry := &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{failed}}
		if sc.s.state.Snapshot().JobByID(ev.GetJobId()) != nil {
			followUp := followUpEval(ev, droverv1.EvalTrigger_EVAL_TRIGGER_FAILED_FOLLOW_UP,
				time.Now().Add(failedFollowUpBaseline+rand.N(failedFollowUpRange)))
			failed.NextEval = followUp.GetId()
			entry.Evals = append(entry.Evals, followUp)
		}
		if _, _, err := sc.s.Apply(ctx, droverv1.MessageTypeEvalUpdate, entry); err != nil {
			// Not acked: the nack timeout brings it back to try again.
			sc.s.logger.Warn("mark evaluation failed", "eval", ev.GetId(), "err", err)
			continue
		}
		if err := sc.broker.Ack(ev.GetId(), token); err != nil {
			sc.s.logger.Warn("ack failed evaluation", "eval", ev.GetId(), "err", err)
		}
	}
}

// followUpEval is a new pending evaluation of ev's job, held until at.
func followUpEval(ev *droverv1.Evaluation, trigger droverv1.EvalTrigger, at time.Time) *droverv1.Evaluation {
	now := time.Now().UnixNano()
	return &droverv1.Evaluation{
		Id:           uuid.NewString(),
		Priority:     ev.GetPriority(),
		Type:         ev.GetType(),
		TriggeredBy:  trigger,
		JobId:        ev.GetJobId(),
		Status:       droverv1.EvalStatus_EVAL_STATUS_PENDING,
		WaitUntil:    at.UnixNano(),
		PreviousEval: ev.GetId(),
		CreateTime:   now,
		ModifyTime:   now,
	}
}

// reapCancelable writes, in batches, the cancellation of evaluations made
// redundant by a newer one of the same job, and of blocked evaluations
// superseded by a newer blocked one. It runs after acks and on a timer, so
// a storm of updates to one job costs a few raft entries, not one each.
func (sc *scheduling) reapCancelable(ctx context.Context) {
	ticker := time.NewTicker(cancelableSweepInterval)
	defer ticker.Stop()
	sweep := &cancelSweep{
		take: func() []*droverv1.Evaluation {
			batch := cancelAll(sc.broker.Cancelable(cancelableBatchSize), "canceled after more recent eval was processed")
			for _, dup := range sc.blocked.TakeDuplicates() {
				batch = append(batch, cancelAll([]*droverv1.Evaluation{dup},
					fmt.Sprintf("existing blocked evaluation exists for job %q", dup.GetJobId()))...)
			}
			return batch
		},
		write: func(ctx context.Context, batch []*droverv1.Evaluation) error {
			_, _, err := sc.s.Apply(ctx, droverv1.MessageTypeEvalUpdate, &droverv1.EvalUpdateEntry{Evals: batch})
			return err
		},
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-sc.ackWake:
		}
		if err := sweep.run(ctx); err != nil && ctx.Err() == nil {
			sc.s.logger.Warn("cancel redundant evaluations; retrying at the next sweep", "count", len(sweep.unwritten), "err", err)
		}
	}
}

// cancelSweep takes the cancellations the broker and the blocked set hand
// over and writes them. Neither hands an evaluation over twice, so a batch
// whose write failed (a full disk, a lost quorum) is kept and written
// before anything new at the next sweep: dropped, its evaluations would
// stay pending in the state, owed to no one, until the next leader.
type cancelSweep struct {
	// take returns the next batch of cancellations, or none.
	take func() []*droverv1.Evaluation
	// write writes a batch in one raft entry.
	write func(ctx context.Context, batch []*droverv1.Evaluation) error
	// unwritten is the batch whose write failed, if any.
	unwritten []*droverv1.Evaluation
}

// run writes batches until none is left or a write fails.
func (c *cancelSweep) run(ctx context.Context) error {
	for ctx.Err() == nil {
		batch := c.unwritten
		if len(batch) == 0 {
			batch = c.take()
		}
		if len(batch) == 0 {
			return nil
		}
		if err := c.write(ctx, batch); err != nil {
			c.unwritten = batch
			return err
		}
		c.unwritten = nil
	}
	return ctx.Err()
}

func cancelAll(evals []*droverv1.Evaluation, why string) []*droverv1.Evaluation {
	out := make([]*droverv1.Evaluation, 0, len(evals))
	now := time.Now().UnixNano()
	for _, ev := range evals {
		c := ev.CloneVT()
		c.Status = droverv1.EvalStatus_EVAL_STATUS_CANCELED
		c.StatusDescription = why
		c.ModifyTime = now
		out = append(out, c)
	}
	return out
}

// pruneBlocked forgets old records of capacity changes the blocked set
// keeps to catch evaluations that blocked on a state older than them.
func (sc *scheduling) pruneBlocked(ctx context.Context) {
	ticker := time.NewTicker(blocked.PruneInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			sc.blocked.Prune()
		}
	}
}

// planCommitter writes plan results through raft for the applier.
type planCommitter struct{ s *Server }

// CommitPlan applies the entry and returns its index.
func (c planCommitter) CommitPlan(ctx context.Context, e *droverv1.PlanResultEntry) (uint64, error) {
	if e.GetDeployment() != nil || len(e.GetDeploymentUpdates()) > 0 {
		// Deployments ride in plan results, which every server applies:
		// only a cluster whose servers all know deployments may see one.
		if err := c.s.gate.check(droverv1.MessageTypeDeploymentStatus); err != nil {
			return 0, err
		}
	}
	index, _, err := c.s.Apply(ctx, droverv1.MessageTypePlanResult, e)
	return index, err
}

// brokerError maps the broker's and plan queue's refusals to the rpc
// layer's errors: a disabled component means leadership moved (retry
// elsewhere), a token that no longer holds its evaluation is the caller's
// precondition.
func brokerError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, broker.ErrDisabled), errors.Is(err, plan.ErrDisabled):
		return fmt.Errorf("%w: %w", rpc.ErrUnavailable, err)
	case errors.Is(err, broker.ErrNotOutstanding), errors.Is(err, broker.ErrTokenMismatch),
		errors.Is(err, broker.ErrNackTimeoutReached), errors.Is(err, broker.ErrNotFound):
		return fmt.Errorf("%w: %w", rpc.ErrFailedPrecondition, err)
	}
	return err
}

// waitIndex is the raft index a worker's state must reach before it
// schedules ev: the newest modify index among the job's evaluations, so
// the worker sees the plan of the job's previous evaluation.
func waitIndex(snap *state.Snapshot, ev *droverv1.Evaluation) uint64 {
	idx := ev.GetModifyIndex()
	for other := range snap.EvalsByJob(ev.GetJobId()) {
		idx = max(idx, other.GetModifyIndex())
	}
	return max(idx, 1)
}
