package rpc

import (
	"context"
	"fmt"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Scheduling is the leader's eval broker and plan queue, and this server's
// own scheduler workers. The server implements it. Broker and plan calls
// reach it only on the leader, because the rpc layer forwards them there;
// they fail with errors wrapping ErrUnavailable when leadership was lost in
// the meantime, and ErrFailedPrecondition when the token no longer holds
// the evaluation.
type Scheduling interface {
	// Dequeue waits up to timeout for an evaluation; nil when none came.
	Dequeue(ctx context.Context, schedulers []droverv1.JobType, timeout time.Duration) (ev *droverv1.Evaluation, token string, waitIndex uint64, err error)
	Ack(evalID, token string) error
	Nack(evalID, token string) error
	SubmitPlan(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, error)
	// UpdateEval, CreateEval and ReblockEval write an evaluation on behalf
	// of the worker holding token and return the raft index.
	UpdateEval(ctx context.Context, ev *droverv1.Evaluation, token string) (uint64, error)
	CreateEval(ctx context.Context, ev *droverv1.Evaluation, token string) (uint64, error)
	ReblockEval(ctx context.Context, ev *droverv1.Evaluation, token string) (uint64, error)
	// Stats reports the broker, blocked evaluations and plan queue.
	Stats() *droverv1.SchedulerStatsResponse
	// Workers describes this server's worker pool.
	Workers() *droverv1.SchedulerWorkersResponse
	// UpdateWorkers changes this server's worker pool.
	UpdateWorkers(req *droverv1.UpdateSchedulerWorkersRequest) (*droverv1.SchedulerWorkersResponse, error)
}

// schedulerService implements droverv1.SchedulerService.
type schedulerService struct {
	*services
	droverv1.UnimplementedSchedulerServiceServer
}

// defaultDequeueTimeout applies when a worker gives no timeout.
const defaultDequeueTimeout = time.Second

func (s *schedulerService) scheduling() (Scheduling, error) {
	if s.sched == nil {
		return nil, fmt.Errorf("scheduling is not running on this server: %w", ErrUnavailable)
	}
	return s.sched, nil
}

// Dequeue hands out the next evaluation with its token and wait index.
func (s *schedulerService) Dequeue(ctx context.Context, req *droverv1.DequeueRequest) (*droverv1.DequeueResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sched, err := s.scheduling()
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(req.GetTimeout())
	if timeout == 0 {
		timeout = defaultDequeueTimeout
	}
	ev, token, waitIndex, err := sched.Dequeue(ctx, req.GetSchedulers(), timeout)
	if err != nil {
		return nil, err
	}
	return &droverv1.DequeueResponse{Eval: ev, Token: token, WaitIndex: waitIndex}, nil
}

// Ack reports an evaluation processed.
func (s *schedulerService) Ack(_ context.Context, req *droverv1.EvalTokenRequest) (*droverv1.EvalTokenResponse, error) {
	return s.tokenCall(req, Scheduling.Ack)
}

// Nack hands an evaluation back.
func (s *schedulerService) Nack(_ context.Context, req *droverv1.EvalTokenRequest) (*droverv1.EvalTokenResponse, error) {
	return s.tokenCall(req, Scheduling.Nack)
}

func (s *schedulerService) tokenCall(req *droverv1.EvalTokenRequest, call func(Scheduling, string, string) error) (*droverv1.EvalTokenResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sched, err := s.scheduling()
	if err != nil {
		return nil, err
	}
	if err := call(sched, req.GetEvalId(), req.GetToken()); err != nil {
		return nil, err
	}
	return &droverv1.EvalTokenResponse{}, nil
}

// SubmitPlan queues a plan and returns what the applier committed, without
// the committed node plans when the request says it has no use for them.
func (s *schedulerService) SubmitPlan(ctx context.Context, req *droverv1.SubmitPlanRequest) (*droverv1.SubmitPlanResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sched, err := s.scheduling()
	if err != nil {
		return nil, err
	}
	res, err := sched.SubmitPlan(ctx, req.GetPlan())
	if err != nil {
		return nil, err
	}
	if req.GetOmitNodePlans() {
		// The result is this call's own; committed_nodes still says how
		// many there were.
		res.NodePlans = nil
	}
	return &droverv1.SubmitPlanResponse{Result: res}, nil
}

// UpdateEval writes the outcome of the evaluation being processed.
func (s *schedulerService) UpdateEval(ctx context.Context, req *droverv1.EvalWriteRequest) (*droverv1.EvalWriteResponse, error) {
	return s.evalWrite(ctx, req, Scheduling.UpdateEval)
}

// CreateEval writes a new evaluation made while processing another.
func (s *schedulerService) CreateEval(ctx context.Context, req *droverv1.EvalWriteRequest) (*droverv1.EvalWriteResponse, error) {
	return s.evalWrite(ctx, req, Scheduling.CreateEval)
}

// ReblockEval puts a blocked evaluation back.
func (s *schedulerService) ReblockEval(ctx context.Context, req *droverv1.EvalWriteRequest) (*droverv1.EvalWriteResponse, error) {
	return s.evalWrite(ctx, req, Scheduling.ReblockEval)
}

func (s *schedulerService) evalWrite(ctx context.Context, req *droverv1.EvalWriteRequest,
	write func(Scheduling, context.Context, *droverv1.Evaluation, string) (uint64, error)) (*droverv1.EvalWriteResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sched, err := s.scheduling()
	if err != nil {
		return nil, err
	}
	index, err := write(sched, ctx, req.GetEval(), req.GetToken())
	if err != nil {
		return nil, err
	}
	return &droverv1.EvalWriteResponse{Index: index}, nil
}

// SchedulerWorkers lists this server's workers.
func (s *operatorService) SchedulerWorkers(context.Context, *droverv1.SchedulerWorkersRequest) (*droverv1.SchedulerWorkersResponse, error) {
	if s.sched == nil {
		return nil, fmt.Errorf("scheduling is not running on this server: %w", ErrUnavailable)
	}
	return s.sched.Workers(), nil
}

// UpdateSchedulerWorkers changes this server's worker pool.
func (s *operatorService) UpdateSchedulerWorkers(_ context.Context, req *droverv1.UpdateSchedulerWorkersRequest) (*droverv1.SchedulerWorkersResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if s.sched == nil {
		return nil, fmt.Errorf("scheduling is not running on this server: %w", ErrUnavailable)
	}
	return s.sched.UpdateWorkers(req)
}

// SchedulerStats reports the leader's broker and plan queue.
func (s *operatorService) SchedulerStats(context.Context, *droverv1.SchedulerStatsRequest) (*droverv1.SchedulerStatsResponse, error) {
	if s.sched == nil {
		return nil, fmt.Errorf("scheduling is not running on this server: %w", ErrUnavailable)
	}
	return s.sched.Stats(), nil
}
