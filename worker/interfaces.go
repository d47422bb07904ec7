package worker

import (
	"context"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// Broker is the leader's eval broker as a worker reaches it.
type Broker interface {
	// Dequeue waits up to timeout for an evaluation of one of the given
	// scheduler types; it returns (nil, "", 0, nil) when nothing came.
	// waitIndex is the index the local state must reach before the
	// evaluation may be scheduled (zero: use the evaluation's own).
	Dequeue(ctx context.Context, schedulers []droverv1.JobType, timeout time.Duration) (ev *droverv1.Evaluation, token string, waitIndex uint64, err error)
	// Ack reports the evaluation processed.
	Ack(ctx context.Context, evalID, token string) error
	// Nack hands the evaluation back for redelivery.
	Nack(ctx context.Context, evalID, token string) error
}

// Leader is the rest of what a worker asks of the leader for one
// evaluation; every call carries the evaluation's token.
type Leader interface {
	// SubmitPlan hands the plan (its EvalToken set) to the plan applier.
	SubmitPlan(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, error)
	UpdateEval(ctx context.Context, ev *droverv1.Evaluation, token string) error
	CreateEval(ctx context.Context, ev *droverv1.Evaluation, token string) error
	ReblockEval(ctx context.Context, ev *droverv1.Evaluation, token string) error
}

// LocalState is this server's state store.
type LocalState interface {
	// LatestIndex is the highest raft index the state has applied.
	LatestIndex() uint64
	// SnapshotMinIndex waits (event-driven, not polling) until the state
	// reached index or ctx ends; it returns ctx.Err() then.
	SnapshotMinIndex(ctx context.Context, index uint64) (scheduler.State, error)
}

// NewScheduler makes the scheduler for an evaluation type, working from st
// and changing the cluster through planner.
type NewScheduler func(typ droverv1.JobType, st scheduler.State, planner scheduler.Planner) (scheduler.Scheduler, error)

// Observer receives how long a worker's steps took, for metrics. Its
// methods are called from the workers' goroutines and must not block.
type Observer interface {
	// Dequeued: one Dequeue call, and whether it brought an evaluation.
	Dequeued(d time.Duration, got bool)
	// WaitedForState: the wait for the local state to reach an
	// evaluation's index, and whether it did.
	WaitedForState(d time.Duration, ok bool)
	// Processed: one evaluation through its scheduler, plans included.
	Processed(typ droverv1.JobType, d time.Duration, err error)
	// PlanSubmitted: one plan's round trip to the plan applier.
	PlanSubmitted(d time.Duration, err error)
}

// noObserver observes nothing.
type noObserver struct{}

func (noObserver) Dequeued(time.Duration, bool)                     {}
func (noObserver) WaitedForState(time.Duration, bool)               {}
func (noObserver) Processed(droverv1.JobType, time.Duration, error) {}
func (noObserver) PlanSubmitted(time.Duration, error)               {}
