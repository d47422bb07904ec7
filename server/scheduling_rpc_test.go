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

// TestSubmitPlanOmitsNodePlans submits two plans of one evaluation over
// gRPC, as a follower's worker does, and checks that the answer leaves the
// committed node plans out only when the request asks it to, counting them
// either way, and that what it leaves out was committed all the same.
func TestSubmitPlanOmitsNodePlans(t *testing.T) {
	s := testserver.Start(t, func(c *server.Config) { c.Scheduler.NumWorkers = 0 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	node := mock.Node()
	nodes := droverv1.NewNodeServiceClient(s.Conn)
	if _, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: node.CloneVT()}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{NodeId: node.GetId(), SecretId: node.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY}); err != nil {
		t.Fatal(err)
	}
	jobs := droverv1.NewJobServiceClient(s.Conn)
	if _, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: mock.Job(2)}); err != nil {
		t.Fatal(err)
	}
	sched := droverv1.NewSchedulerServiceClient(s.Conn)
	var held *droverv1.DequeueResponse
	for held.GetEval() == nil {
		var err error
		if held, err = sched.Dequeue(ctx, &droverv1.DequeueRequest{Schedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE}, Timeout: int64(time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	ev := held.GetEval()
	stored, err := jobs.Get(ctx, &droverv1.GetJobRequest{JobId: ev.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	allocs := droverv1.NewAllocServiceClient(s.Conn)
	for i, omit := range []bool{true, false} {
		a := mock.Alloc(node, stored.GetJob(), i)
		a.EvalId = ev.GetId()
		p := &droverv1.Plan{EvalId: ev.GetId(), EvalToken: held.GetToken(), JobId: ev.GetJobId(), Priority: ev.GetPriority(),
			NodePlans: []*droverv1.NodePlan{{NodeId: node.GetId(), Allocations: []*droverv1.Allocation{a}}}}
		resp, err := sched.SubmitPlan(ctx, &droverv1.SubmitPlanRequest{Plan: p, OmitNodePlans: omit})
		if err != nil {
			t.Fatalf("submit plan %d (omit %t): %v", i, omit, err)
		}
		res := resp.GetResult()
		if res.GetCommittedNodes() != 1 || res.GetAllocIndex() == 0 || len(res.GetRejectedNodeIds()) != 0 {
			t.Errorf("omit %t: committed %d nodes at index %d, rejected %v; want 1 node at a raft index, none rejected",
				omit, res.GetCommittedNodes(), res.GetAllocIndex(), res.GetRejectedNodeIds())
		}
		sent := res.GetNodePlans()
		switch {
		case omit && len(sent) != 0:
			t.Errorf("omit: %d node plans in the answer, want none", len(sent))
		case !omit && (len(sent) != 1 || sent[0].GetAllocations()[0].GetId() != a.GetId()):
			t.Errorf("not omitted: node plans %v, want the one of allocation %s", sent, a.GetId())
		}
		got, err := allocs.Get(ctx, &droverv1.GetAllocationRequest{AllocId: a.GetId()})
		if err != nil {
			t.Fatalf("omit %t: allocation %s not stored: %v", omit, a.GetId(), err)
		}
		if got.GetAllocation().GetCreateIndex() != res.GetAllocIndex() {
			t.Errorf("omit %t: allocation stored at index %d, answer says %d", omit, got.GetAllocation().GetCreateIndex(), res.GetAllocIndex())
		}
	}
}
