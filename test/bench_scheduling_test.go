package test_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// BenchmarkPlacementsEndToEnd measures scheduling end to end on a 3-server
// cluster of real processes: from Job.Register on a follower until every
// job's evaluation is complete with every allocation placed (committed
// through raft; read from the leader). Each iteration registers jobs jobs
// of allocs allocations at once on a cluster of 2,000 ready nodes, so
// workers on every server take part; placements/s is the figure to quote.
//
//	go test -run '^$' -bench PlacementsEndToEnd -benchtime 5x -count 5 ./test/
func BenchmarkPlacementsEndToEnd(b *testing.B) {
	c := cluster.New(b, droverBin, 3)
	ctx := b.Context()
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	readyNodes(ctx, b, follower.Conn(), 2000)
	for _, bc := range []struct{ jobs, allocs int32 }{{1, 1000}, {10, 1000}} {
		b.Run(fmt.Sprintf("jobs=%d/allocs=%d", bc.jobs, bc.allocs), func(b *testing.B) {
			jobs := droverv1.NewJobServiceClient(follower.Conn())
			evals := droverv1.NewEvalServiceClient(leader.Conn())
			placed := 0
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				errs := make(chan error, bc.jobs)
				for range bc.jobs {
					wg.Go(func() { errs <- placeJob(ctx, jobs, evals, bc.allocs) })
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				placed += int(bc.jobs * bc.allocs)
			}
			b.StopTimer()
			b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
			if stats, err := droverv1.NewOperatorServiceClient(leader.Conn()).SchedulerStats(ctx, &droverv1.SchedulerStatsRequest{}); err == nil {
				b.ReportMetric(float64(stats.GetPlansPartiallyRejected()), "rejected-plans")
			}
		})
	}
}

// placeJob registers a job of small allocations (so 2,000 nodes hold every
// iteration) and waits until its evaluation placed all of them.
func placeJob(ctx context.Context, jobs droverv1.JobServiceClient, evals droverv1.EvalServiceClient, allocs int32) error {
	job := mock.Job(allocs)
	job.TaskGroups[0].Resources.CpuMhz, job.TaskGroups[0].Resources.MemoryMb = 10, 10
	resp, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: job, RequestId: uuid.NewString()})
	if err != nil {
		return err
	}
	ev, err := waitEvalDone(ctx, evals, resp.GetEvalId(), resp.GetIndex())
	if err != nil {
		return err
	}
	if ev.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE || len(ev.GetPlacementFailures()) > 0 {
		return fmt.Errorf("evaluation %s ended %s with failures %v", ev.GetId(), ev.GetStatus(), ev.GetPlacementFailures())
	}
	return nil
}

// waitEvalDone blocks on the evaluation until it is no longer pending, and
// returns it.
func waitEvalDone(ctx context.Context, evals droverv1.EvalServiceClient, id string, index uint64) (*droverv1.Evaluation, error) {
	for {
		resp, err := evals.Get(ctx, &droverv1.GetEvaluationRequest{EvalId: id, Query: &droverv1.QueryOptions{
			MinIndex: index, MaxWait: durationpb.New(10 * time.Second),
		}})
		if err != nil {
			return nil, fmt.Errorf("evaluation %s: %w", id, err)
		}
		if st := resp.GetEvaluation().GetStatus(); st != droverv1.EvalStatus_EVAL_STATUS_PENDING {
			return resp.GetEvaluation(), nil
		}
		index = resp.GetMeta().GetIndex()
	}
}
