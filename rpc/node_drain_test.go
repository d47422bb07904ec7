package rpc_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestUpdateDrainRejections checks the drain requests that must change
// nothing.
func TestUpdateDrainRejections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	for _, tc := range []struct {
		name  string
		req   *droverv1.UpdateNodeDrainRequest
		code  codes.Code
		field string
	}{
		{"force with a deadline", &droverv1.UpdateNodeDrainRequest{NodeId: n.GetId(), Enable: true, Force: true, Deadline: durationpb.New(time.Hour)}, codes.InvalidArgument, "force"},
		{"force when ending a drain", &droverv1.UpdateNodeDrainRequest{NodeId: n.GetId(), Force: true}, codes.InvalidArgument, "force"},
		{"ignore_system_jobs when ending a drain", &droverv1.UpdateNodeDrainRequest{NodeId: n.GetId(), IgnoreSystemJobs: true}, codes.InvalidArgument, "ignore_system_jobs"},
		{"negative deadline", &droverv1.UpdateNodeDrainRequest{NodeId: n.GetId(), Enable: true, Deadline: durationpb.New(-time.Second)}, codes.InvalidArgument, "deadline"},
		{"negative legacy deadline", &droverv1.UpdateNodeDrainRequest{NodeId: n.GetId(), Enable: true, DeadlineNs: -1}, codes.InvalidArgument, "deadline_ns"},
		{"legacy deadline when ending a drain", &droverv1.UpdateNodeDrainRequest{NodeId: n.GetId(), DeadlineNs: int64(time.Hour)}, codes.InvalidArgument, "deadline"},
		{"not a node id", &droverv1.UpdateNodeDrainRequest{NodeId: "n1", Enable: true}, codes.InvalidArgument, "node_id"},
		{"unknown node", &droverv1.UpdateNodeDrainRequest{NodeId: mock.ID(), Enable: true}, codes.NotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.latestIndex()
			_, err := e.nodes.UpdateDrain(e.ctx(), tc.req)
			if tc.field != "" {
				wantInvalid(t, err, tc.field)
			} else {
				wantCode(t, err, tc.code)
			}
			if after := e.latestIndex(); after != before {
				t.Errorf("a refused request wrote to raft: index %d -> %d", before, after)
			}
		})
	}
}

// TestDrainForced drains a node with -force on a server without scheduler
// workers: starting the drain writes no evaluation, its deadline is its
// start, and the leader's drainer marks every allocation to migrate at once
// with an evaluation of the job, then ends the drain.
func TestDrainForced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	job := e.job(2)
	allocs := e.place(n, job, 2)
	if _, err := e.report(n, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, allocs[0].GetId(), allocs[1].GetId()); err != nil {
		t.Fatal(err)
	}
	resp, err := e.nodes.UpdateDrain(e.ctx(), &droverv1.UpdateNodeDrainRequest{NodeId: n.GetId(), Enable: true, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetEvalIds()) != 0 {
		t.Errorf("starting a drain wrote evaluations %v; the drainer writes them", resp.GetEvalIds())
	}
	started := false
	for _, ev := range e.srv.State().Snapshot().NodeByID(n.GetId()).GetEvents() {
		started = started || (ev.GetMessage() == "Node drain started" && ev.GetCreateIndex() == resp.GetIndex())
	}
	if !started {
		t.Fatalf("no drain-started event at index %d", resp.GetIndex())
	}

	ctx := e.ctx()
	deadline := time.Now().Add(20 * time.Second)
	for {
		snap := e.srv.State().Snapshot()
		node := snap.NodeByID(n.GetId())
		a0, a1 := snap.AllocByID(allocs[0].GetId()), snap.AllocByID(allocs[1].GetId())
		if node.GetDrainStrategy() == nil && a0.GetDesiredTransition().GetMigrate() && a1.GetDesiredTransition().GetMigrate() {
			if node.GetSchedulingEligibility() != droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE {
				t.Errorf("node eligibility %s after its drain, want ineligible", node.GetSchedulingEligibility())
			}
			drainEvals := 0
			for ev := range snap.EvalsByJob(job.GetId()) {
				if ev.GetTriggeredBy() == droverv1.EvalTrigger_EVAL_TRIGGER_NODE_DRAIN {
					drainEvals++
				}
			}
			if drainEvals != 1 {
				t.Errorf("%d drain evaluations of job %s, want 1 for both allocations", drainEvals, job.GetId())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: drain %v, transitions %v and %v; want both marked and the drain over",
				node.GetDrainStrategy(), a0.GetDesiredTransition(), a1.GetDesiredTransition())
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond): // the drainer runs once a second
		}
	}
}
