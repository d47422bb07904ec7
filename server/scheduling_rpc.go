package server

import (
	"context"
	"fmt"
	"time"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/groupcommit"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// The scheduling side serves the rpc layer's scheduler service.
var _ rpc.Scheduling = (*schedulingService)(nil)

// schedulingService answers the scheduler service: broker and plan calls on
// the leader, worker-pool calls on every server.
type schedulingService struct {
	sc      *scheduling
	workers *workerPool
	// evals writes the workers' evaluations, those that arrive while one
	// entry of them is in flight together in the next.
	evals *groupcommit.Committer[*droverv1.Evaluation]
}

// maxEvalsPerEntry bounds the evaluations the workers' writes share one
// raft entry with.
const maxEvalsPerEntry = 128

func newSchedulingService(sc *scheduling, workers *workerPool) *schedulingService {
	h := &schedulingService{sc: sc, workers: workers}
	h.evals = &groupcommit.Committer[*droverv1.Evaluation]{MaxWeight: maxEvalsPerEntry, Write: h.writeEvals}
	return h
}

// Dequeue hands out the next evaluation with the index the worker must
// wait for.
func (h *schedulingService) Dequeue(ctx context.Context, schedulers []droverv1.JobType, timeout time.Duration) (*droverv1.Evaluation, string, uint64, error) {
	ev, token, err := h.sc.broker.Dequeue(ctx, schedulers, timeout)
	if err != nil || ev == nil {
		return nil, "", 0, brokerError(err)
	}
	return ev, token, waitIndex(h.sc.s.state.Snapshot(), ev), nil
}

// Ack reports an evaluation processed and nudges the cancelable sweep.
func (h *schedulingService) Ack(evalID, token string) error {
	if err := h.sc.broker.Ack(evalID, token); err != nil {
		return brokerError(err)
	}
	select {
	case h.sc.ackWake <- struct{}{}:
	default:
	}
	return nil
}

// Nack hands an evaluation back for redelivery.
func (h *schedulingService) Nack(evalID, token string) error {
	return brokerError(h.sc.broker.Nack(evalID, token))
}

// SubmitPlan queues a plan whose evaluation the token still holds. The
// evaluation's nack timer is paused while the plan waits, so a long plan
// queue does not make the broker redeliver evaluations being applied.
func (h *schedulingService) SubmitPlan(ctx context.Context, p *droverv1.Plan) (*droverv1.PlanResult, error) {
	if err := h.sc.broker.PauseNackTimeout(p.GetEvalId(), p.GetEvalToken()); err != nil {
		return nil, brokerError(err)
	}
	defer func() {
		// The eval may have been acked or the broker disabled meanwhile.
		_ = h.sc.broker.ResumeNackTimeout(p.GetEvalId(), p.GetEvalToken())
	}()
	future, err := h.sc.plans.Enqueue(p)
	if err != nil {
		return nil, brokerError(err)
	}
	res, err := future.Wait(ctx)
	if err != nil {
		return nil, brokerError(fmt.Errorf("plan of evaluation %s: %w", p.GetEvalId(), err))
	}
	return res, nil
}

// UpdateEval writes the outcome of the evaluation the token holds.
func (h *schedulingService) UpdateEval(ctx context.Context, ev *droverv1.Evaluation, token string) (uint64, error) {
	if err := h.sc.broker.OutstandingReset(ev.GetId(), token); err != nil {
		return 0, brokerError(err)
	}
	return h.writeEval(ctx, ev)
}

// CreateEval writes a new evaluation made by the worker holding the token
// of its previous evaluation.
func (h *schedulingService) CreateEval(ctx context.Context, ev *droverv1.Evaluation, token string) (uint64, error) {
	if ev.GetPreviousEval() == "" {
		return 0, fmt.Errorf("create evaluation %s: previous_eval must name the evaluation being processed: %w", ev.GetId(), rpc.ErrFailedPrecondition)
	}
	if err := h.sc.broker.OutstandingReset(ev.GetPreviousEval(), token); err != nil {
		return 0, brokerError(err)
	}
	if h.sc.s.state.Snapshot().EvalByID(ev.GetId()) != nil {
		return 0, fmt.Errorf("create evaluation %s: it already exists: %w", ev.GetId(), rpc.ErrFailedPrecondition)
	}
	return h.writeEval(ctx, ev)
}

// ReblockEval returns a blocked evaluation that still cannot place
// everything to the blocked set, keeping the token so that capacity that
// appears before the worker acks requeues it after the ack.
func (h *schedulingService) ReblockEval(_ context.Context, ev *droverv1.Evaluation, token string) (uint64, error) {
	stored := h.sc.s.state.Snapshot().EvalByID(ev.GetId())
	if stored == nil {
		return 0, fmt.Errorf("reblock evaluation %s: %w", ev.GetId(), state.ErrNotFound)
	}
	if stored.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_BLOCKED {
		return 0, fmt.Errorf("reblock evaluation %s: status is %s, not blocked: %w", ev.GetId(), stored.GetStatus(), rpc.ErrFailedPrecondition)
	}
	if err := h.sc.broker.OutstandingReset(ev.GetId(), token); err != nil {
		return 0, brokerError(err)
	}
	h.sc.blocked.Reblock(ev, token)
	return stored.GetModifyIndex(), nil
}

// writeEval writes one worker's evaluation, in an entry shared with the
// evaluations of other workers written at the same time. The FSM refuses
// an evaluation only when it lacks its job or status, which the request's
// validation already refused, so one worker's evaluation cannot fail the
// others'. If ctx ends first the evaluation is still written.
func (h *schedulingService) writeEval(ctx context.Context, ev *droverv1.Evaluation) (uint64, error) {
	g, _, err := h.evals.Submit(ctx, ev, 1)
	if err != nil {
		return 0, fmt.Errorf("write evaluation %s: %w", ev.GetId(), err)
	}
	return g.Index, nil
}

// writeEvals writes workers' evaluations as one entry.
func (h *schedulingService) writeEvals(evals []*droverv1.Evaluation) (uint64, any, error) {
	index, _, err := h.sc.s.Apply(context.Background(), droverv1.MessageTypeEvalUpdate, &droverv1.EvalUpdateEntry{Evals: evals})
	if err != nil {
		h.sc.s.logger.Warn("writing evaluations failed", "evals", len(evals), "err", err)
	}
	return index, nil, err
}

// Stats reports the broker, blocked evaluations and plan queue.
func (h *schedulingService) Stats() *droverv1.SchedulerStatsResponse {
	bs := h.sc.broker.Stats()
	out := &droverv1.SchedulerStatsResponse{
		Ready:      int32(bs.Ready),
		Unacked:    int32(bs.Unacked),
		Pending:    int32(bs.Pending),
		Delayed:    int32(bs.Delayed),
		Cancelable: int32(bs.Cancelable),
		Failed:     int32(bs.Failed),
	}
	for _, typ := range []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE, droverv1.JobType_JOB_TYPE_BATCH, droverv1.JobType_JOB_TYPE_SYSTEM} {
		st := bs.ByScheduler[typ]
		out.ByScheduler = append(out.ByScheduler, &droverv1.BrokerQueueStats{Scheduler: typ, Ready: int32(st.Ready), Unacked: int32(st.Unacked)})
	}
	blockedStats := h.sc.blocked.Stats()
	out.Blocked, out.BlockedEscaped = int32(blockedStats.Blocked), int32(blockedStats.Escaped)
	out.PlanQueueDepth = int32(h.sc.plans.Stats().Depth)
	h.sc.mu.Lock()
	applier := h.sc.applier
	h.sc.mu.Unlock()
	if applier != nil {
		as := applier.Stats()
		out.PlansApplied, out.PlansPartiallyRejected, out.PlanNodesRejected = as.Applied, as.PartiallyRejected, as.NodesRejected
		out.PlanPlacementsRelocated = as.PlacementsRelocated
	}
	return out
}

// Workers describes this server's worker pool.
func (h *schedulingService) Workers() *droverv1.SchedulerWorkersResponse { return h.workers.describe() }

// UpdateWorkers changes this server's worker pool.
func (h *schedulingService) UpdateWorkers(req *droverv1.UpdateSchedulerWorkersRequest) (*droverv1.SchedulerWorkersResponse, error) {
	return h.workers.update(req)
}
