package test_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestLaggingFollowerNacks stalls the raft traffic to one follower, whose
// workers are then the only ones scheduling, and registers a job. The
// follower's worker dequeues the evaluation from the leader but its own
// state lacks the job: it must nack rather than schedule on old state, and
// nothing may be placed while it lags. Once the stall ends the follower
// catches up and the same evaluation is placed in full.
//
// The follower's raft port is reached through a proxy (-raft-advertise)
// that holds bytes without closing connections, and the follower runs with
// -raft-multiplier 10, so the stall (a few seconds, under raft's 10s I/O
// timeout) neither breaks connections nor starts an election: the follower
// just falls behind, as on a congested link.
func TestLaggingFollowerNacks(t *testing.T) {
	proxy := cluster.NewProxy(t)
	const lagging = 3
	c := cluster.New(t, droverBin, 3,
		cluster.ServerArgs(lagging, "-raft-advertise", proxy.Addr(), "-raft-multiplier", "10"),
		cluster.BeforeFirstStart(func(s *cluster.Server) {
			if s.ID() == "s"+itoa(lagging) {
				proxy.SetTarget(s.RaftAddr())
			}
		}))
	ctx := within(t, testContext(t), 3*time.Minute)
	follower := c.Server(lagging)
	leader := c.WaitLeader(ctx)
	if leader == follower {
		// Its 10s election timeout makes this rare: hand leadership on.
		target := c.Others(follower)[0]
		_, err := droverv1.NewOperatorServiceClient(leader.Conn()).RaftTransferLeadership(ctx, &droverv1.RaftTransferLeadershipRequest{Id: target.ID()})
		if err != nil {
			t.Fatalf("transfer leadership to %s: %v", target, err)
		}
		leader = c.WaitLeader(ctx, c.Others(follower)...)
	}
	nodes := readyNodes(ctx, t, leader.Conn(), 10)
	for _, s := range c.Others(follower) {
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(true)})
	}
	// The follower's worker reaches the leader at the gRPC address the
	// servers table records; the leader's announcement may still be in
	// flight after a slow formation, and would then stall with the rest.
	waitRecorded(ctx, t, c)
	poll(ctx, t, follower.ID()+" has the nodes", func() (bool, string) {
		info, err := serverInfo(ctx, follower)
		if err != nil {
			return false, err.Error()
		}
		leaderInfo, err := serverInfo(ctx, leader)
		if err != nil {
			return false, err.Error()
		}
		return info.GetAppliedIndex() >= leaderInfo.GetAppliedIndex(), "applied " + itoa(int(info.GetAppliedIndex())) + " of " + itoa(int(leaderInfo.GetAppliedIndex()))
	})
	_, nackedBefore := acked(ctx, t, follower)

	proxy.Stall()
	job := mock.Job(20)
	resp, err := registerJob(ctx, leader.Conn(), job, uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, follower.ID()+" nacked the evaluation it could not see", func() (bool, string) {
		_, nacked := acked(ctx, t, follower)
		return nacked > nackedBefore, "no nack yet"
	})
	info, err := serverInfo(ctx, follower)
	if err != nil {
		t.Fatal(err)
	}
	if info.GetAppliedIndex() >= resp.GetIndex() {
		t.Fatalf("%s applied index %d reached the job's %d during the stall: the test did not make it lag", follower, info.GetAppliedIndex(), resp.GetIndex())
	}
	allocs, err := jobAllocs(ctx, leader.Conn(), job.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 0 {
		t.Fatalf("%d allocations placed while the only scheduling server was behind", len(allocs))
	}
	proxy.Resume()

	waitPlaced(ctx, t, leader, job.GetId(), 20)
	poll(ctx, t, "the evaluation acked by "+follower.ID(), func() (bool, string) {
		ev, err := droverv1.NewEvalServiceClient(leader.Conn()).Get(ctx, &droverv1.GetEvaluationRequest{EvalId: resp.GetEvalId()})
		if err != nil {
			return false, err.Error()
		}
		st := ev.GetEvaluation().GetStatus()
		return st == droverv1.EvalStatus_EVAL_STATUS_COMPLETE, "status " + st.String()
	})
	checkInvariants(ctx, t, leader, nodes, job.GetId())
}
