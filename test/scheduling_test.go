package test_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
	"github.com/droverhq/drover/worker"
)

// TestJobPlacedFromFollower registers nodes and jobs through followers of a
// 3-server cluster. First each server in turn is the only one scheduling,
// so every server's workers place a job through the leader's broker and
// plan applier; then a job of count 500 registered on a follower is placed
// in full on 100 nodes by all workers together.
func TestJobPlacedFromFollower(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 3*time.Minute)
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	nodes := readyNodes(ctx, t, follower.Conn(), 100)
	jobIDs := []string{}
	poll(ctx, t, "the leader parked its share of workers", func() (bool, string) {
		resp, err := droverv1.NewOperatorServiceClient(leader.Conn()).SchedulerWorkers(ctx, &droverv1.SchedulerWorkersRequest{})
		if err != nil {
			return false, err.Error()
		}
		parked := 0
		for _, w := range resp.GetWorkers() {
			if w.GetStatus() == "paused" {
				parked++
			}
		}
		want := worker.LeaderPausedWorkers(len(resp.GetWorkers()))
		return parked == want && !resp.GetPaused(), itoa(parked) + " parked, want " + itoa(want)
	})

	for _, s := range c.Servers() {
		for _, other := range c.Others(s) {
			setWorkers(ctx, t, other, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(true)})
		}
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(false)})
		before, _ := acked(ctx, t, s)
		job := mock.Job(5)
		if _, err := registerJob(ctx, follower.Conn(), job, uuid.NewString()); err != nil {
			t.Fatal(err)
		}
		jobIDs = append(jobIDs, job.GetId())
		waitPlaced(ctx, t, follower, job.GetId(), 5)
		poll(ctx, t, "workers of "+s.ID()+" acked the job's evaluation", func() (bool, string) {
			after, _ := acked(ctx, t, s)
			return after > before, "no new ack"
		})
	}
	for _, s := range c.Servers() {
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(false)})
	}

	big := mock.Job(500)
	if _, err := registerJob(ctx, follower.Conn(), big, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	jobIDs = append(jobIDs, big.GetId())
	allocs := waitPlaced(ctx, t, follower, big.GetId(), 500)
	onNodes := make(map[string]int)
	for _, a := range allocs {
		onNodes[a.GetNodeId()]++
	}
	t.Logf("500 allocations on %d nodes", len(onNodes))
	checkInvariants(ctx, t, leader, nodes, jobIDs...)
}

// TestRacingWorkersNeverOvercommit lets workers on two servers schedule two
// jobs that each want the last free capacity of a node. The plan applier
// commits one and rejects the other, whose worker plans again on the
// refreshed state and leaves a blocked evaluation. The node is never
// overcommitted. The race is likely, not certain, in one round, so rounds
// repeat until the applier has rejected a plan.
func TestRacingWorkersNeverOvercommit(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 3*time.Minute)
	leader := c.WaitLeader(ctx)
	followers := c.Others(leader)
	setWorkers(ctx, t, leader, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(true)})
	for _, f := range followers {
		setWorkers(ctx, t, f, &droverv1.UpdateSchedulerWorkersRequest{NumWorkers: ptr(int32(1))})
	}
	ops := droverv1.NewOperatorServiceClient(leader.Conn())
	var allNodes []*droverv1.Node
	for round := 1; ; round++ {
		nodes := readyNodes(ctx, t, leader.Conn(), 1)
		allNodes = append(allNodes, nodes...)
		// Each job's one allocation needs more than half the node.
		cpu := nodes[0].GetResources().GetCpuMhz() - nodes[0].GetReserved().GetCpuMhz()
		jobs := []*droverv1.Job{mock.Job(1), mock.Job(1)}
		for _, j := range jobs {
			j.TaskGroups[0].Resources.CpuMhz = cpu/2 + 1
			j.Constraints = []*droverv1.Constraint{{Attribute: "node.id", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: nodes[0].GetId()}}
		}
		done := make(chan error, len(jobs))
		for i, j := range jobs {
			go func() {
				_, err := registerJob(ctx, followers[i].Conn(), j, uuid.NewString())
				done <- err
			}()
		}
		for range jobs {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		poll(ctx, t, "one job placed and the other blocked", func() (bool, string) {
			placed := 0
			for _, j := range jobs {
				allocs, err := jobAllocs(ctx, leader.Conn(), j.GetId())
				if err != nil {
					return false, err.Error()
				}
				placed += wantedRunning(allocs)
			}
			stats, err := ops.SchedulerStats(ctx, &droverv1.SchedulerStatsRequest{})
			if err != nil {
				return false, err.Error()
			}
			return placed == 1 && stats.GetBlocked() >= int32(round), "placed " + itoa(placed) + ", blocked " + itoa(int(stats.GetBlocked()))
		})
		checkInvariants(ctx, t, leader, allNodes, jobs[0].GetId(), jobs[1].GetId())
		stats, err := ops.SchedulerStats(ctx, &droverv1.SchedulerStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if stats.GetPlanNodesRejected() > 0 {
			t.Logf("applier rejected a racing plan in round %d", round)
			return
		}
		if round == 20 {
			t.Fatalf("no racing plan was rejected in %d rounds", round)
		}
	}
}

// TestLeaderKilledWhilePlacing kills the leader in the middle of placing a
// large job: the nodes registered so far hold part of it, the rest waits in
// a blocked evaluation, and more nodes arrive during the failover. The new
// leader rebuilds its broker and blocked set from the state, and the job
// ends with exactly its count placed: none lost, none twice.
func TestLeaderKilledWhilePlacing(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 3*time.Minute)
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	nodes := readyNodes(ctx, t, follower.Conn(), 10)
	perNode := int((nodes[0].GetResources().GetCpuMhz() - nodes[0].GetReserved().GetCpuMhz()) / mock.Job(1).GetTaskGroups()[0].GetResources().GetCpuMhz())

	const count = 1000
	job := mock.Job(count)
	if _, err := registerJob(ctx, follower.Conn(), job, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	waitPlaced(ctx, t, follower, job.GetId(), 10*perNode)
	leader.Kill()
	// Enough nodes for the rest arrive while the cluster elects a leader.
	nodes = append(nodes, readyNodes(ctx, t, follower.Conn(), (count+perNode-1)/perNode-10+5)...)
	newLeader := c.WaitLeader(ctx, c.Others(leader)...)
	t.Logf("leader %s killed with %d of %d placed; %s took over", leader, 10*perNode, count, newLeader)
	waitPlaced(ctx, t, newLeader, job.GetId(), count)
	leader.Restart()
	c.WaitConverged(ctx)
	allocs, err := jobAllocs(ctx, newLeader.Conn(), job.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if got := wantedRunning(allocs); got != count {
		t.Errorf("after convergence %d allocations wanted running, want %d", got, count)
	}
	checkInvariants(ctx, t, newLeader, nodes, job.GetId())
}

// TestBlockedEvalUnblockedByNewNode registers a job that does not fit: what
// fits is placed and a blocked evaluation waits. A new node turning ready
// releases it and the rest is placed.
func TestBlockedEvalUnblockedByNewNode(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 2*time.Minute)
	leader := c.WaitLeader(ctx)
	nodes := readyNodes(ctx, t, leader.Conn(), 1)
	job := mock.Job(2)
	cpu := nodes[0].GetResources().GetCpuMhz() - nodes[0].GetReserved().GetCpuMhz()
	job.TaskGroups[0].Resources.CpuMhz = cpu/2 + 1
	if _, err := registerJob(ctx, leader.Conn(), job, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	waitPlaced(ctx, t, leader, job.GetId(), 1)
	var blocked *droverv1.Evaluation
	poll(ctx, t, "a blocked evaluation of the job", func() (bool, string) {
		blocked = nil
		resp, err := droverv1.NewJobServiceClient(leader.Conn()).Evaluations(ctx, &droverv1.ListJobEvaluationsRequest{JobId: job.GetId()})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range resp.GetEvaluations() {
			if ev.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_BLOCKED {
				blocked = ev
			}
		}
		return blocked != nil, "no blocked evaluation"
	})
	if q := blocked.GetQueuedAllocations()["web"]; q != 1 {
		t.Errorf("blocked evaluation queues %d allocations of group web, want 1", q)
	}

	nodes = append(nodes, readyNodes(ctx, t, leader.Conn(), 1)...)
	waitPlaced(ctx, t, leader, job.GetId(), 2)
	// Two evaluations of the job may each have left a blocked one; the
	// blocked set keeps one per job and cancels the other. The one it kept
	// completes once the new node releases it, and none stays blocked.
	poll(ctx, t, "a blocked evaluation completed and none left blocked", func() (bool, string) {
		resp, err := droverv1.NewJobServiceClient(leader.Conn()).Evaluations(ctx, &droverv1.ListJobEvaluationsRequest{JobId: job.GetId()})
		if err != nil {
			return false, err.Error()
		}
		wasBlocked := map[string]bool{blocked.GetId(): true}
		for _, ev := range resp.GetEvaluations() {
			if id := ev.GetBlockedEval(); id != "" {
				wasBlocked[id] = true
			}
		}
		completed, states := false, []string{}
		for _, ev := range resp.GetEvaluations() {
			if !wasBlocked[ev.GetId()] {
				continue
			}
			states = append(states, ev.GetId()+" "+ev.GetStatus().String())
			switch ev.GetStatus() {
			case droverv1.EvalStatus_EVAL_STATUS_BLOCKED:
				return false, fmt.Sprint(states)
			case droverv1.EvalStatus_EVAL_STATUS_COMPLETE:
				completed = true
			}
		}
		return completed, fmt.Sprint(states)
	})
	checkInvariants(ctx, t, leader, nodes, job.GetId())
}

func itoa(n int) string { return strconv.Itoa(n) }
