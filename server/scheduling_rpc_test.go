package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// TestWorkersEvalWritesAtOnce has workers' evaluation outcomes written at
// the same time, as they share raft entries, and checks that every one is
// stored, complete, at the index its call was answered with, and that a
// call whose token no longer holds its evaluation writes nothing.
func TestWorkersEvalWritesAtOnce(t *testing.T) {
	s := testserver.Start(t, func(c *server.Config) { c.Scheduler.NumWorkers = 0 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	jobs := droverv1.NewJobServiceClient(s.Conn)
	sched := droverv1.NewSchedulerServiceClient(s.Conn)
	const n = 8
	for range n {
		if _, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: mock.Job(1)}); err != nil {
			t.Fatal(err)
		}
	}
	var held []*droverv1.DequeueResponse
	for len(held) < n {
		resp, err := sched.Dequeue(ctx, &droverv1.DequeueRequest{Schedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE}, Timeout: int64(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetEval() != nil {
			held = append(held, resp)
		}
	}

	indexes := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, h := range held {
		wg.Go(func() {
			done := h.GetEval().CloneVT()
			done.Status = droverv1.EvalStatus_EVAL_STATUS_COMPLETE
			resp, err := sched.UpdateEval(ctx, &droverv1.EvalWriteRequest{Eval: done, Token: h.GetToken()})
			indexes[i], errs[i] = resp.GetIndex(), err
		})
	}
	wg.Wait()

	evals := droverv1.NewEvalServiceClient(s.Conn)
	for i, h := range held {
		if errs[i] != nil {
			t.Fatalf("update eval %s: %v", h.GetEval().GetId(), errs[i])
		}
		got, err := evals.Get(ctx, &droverv1.GetEvaluationRequest{EvalId: h.GetEval().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if ev := got.GetEvaluation(); ev.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE || ev.GetModifyIndex() != indexes[i] {
			t.Errorf("eval %s stored %s at index %d, want complete at the answered index %d", ev.GetId(), ev.GetStatus(), ev.GetModifyIndex(), indexes[i])
		}
	}

	// Acked, the token no longer holds the evaluation.
	first := held[0]
	if _, err := sched.Ack(ctx, &droverv1.EvalTokenRequest{EvalId: first.GetEval().GetId(), Token: first.GetToken()}); err != nil {
		t.Fatal(err)
	}
	failed := first.GetEval().CloneVT()
	failed.Status = droverv1.EvalStatus_EVAL_STATUS_FAILED
	if _, err := sched.UpdateEval(ctx, &droverv1.EvalWriteRequest{Eval: failed, Token: first.GetToken()}); err == nil {
		t.Fatal("update with a token acked: nil error, want a refusal")
	}
	got, err := evals.Get(ctx, &droverv1.GetEvaluationRequest{EvalId: first.GetEval().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetEvaluation().GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE {
		t.Fatalf("refused update changed the eval to %s", got.GetEvaluation().GetStatus())
	}
}
