package test_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestStoppedAllocationHoldsPortAndAddress updates a job whose allocation
// holds a static port on the only node. The new version needs the same
// port, so it cannot be placed while the old allocation may still run:
// the old one is wanted stopped but its agent has not reported it done.
// Once the agent reports it complete, the new allocation is placed right
// away, on the port, and not on the address just released (released
// addresses go to the back of the free list).
func TestStoppedAllocationHoldsPortAndAddress(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 90*time.Second)
	c.WaitLeader(ctx)
	conn := c.Server(1).Conn()
	node := readyNodes(ctx, t, conn, 1)[0]
	agent := &reconnectAgent{conn: conn, node: node}

	job := mock.Job(1)
	job.GetTaskGroups()[0].GetResources().Ports = []*droverv1.Port{{Label: "http", Value: 8080}}
	if _, err := registerJob(ctx, conn, job, ""); err != nil {
		t.Fatal(err)
	}
	old := waitPlaced(ctx, t, c.Server(1), job.GetId(), 1)[0]
	if err := agent.report(ctx, []*droverv1.AllocClientUpdate{{AllocId: old.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}}); err != nil {
		t.Fatal(err)
	}

	update := job.CloneVT()
	update.GetTaskGroups()[0].GetTasks()[0].Config = map[string]string{"command": "/bin/server-v2"}
	resp, err := registerJob(ctx, conn, update, "")
	if err != nil {
		t.Fatal(err)
	}
	// The update's evaluation completes with the old allocation stopped and
	// the new one blocked for want of the port.
	poll(ctx, t, "the update evaluated and blocked on the port", func() (bool, string) {
		ev, err := droverv1.NewEvalServiceClient(conn).Get(ctx, &droverv1.GetEvaluationRequest{EvalId: resp.GetEvalId()})
		if err != nil {
			return false, err.Error()
		}
		if ev.GetEvaluation().GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE || ev.GetEvaluation().GetBlockedEval() == "" {
			return false, "update evaluation " + ev.GetEvaluation().GetStatus().String()
		}
		return true, ""
	})
	allocs, err := jobAllocs(ctx, conn, job.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 1 || !allocs[0].ServerTerminal() || allocs[0].GetId() != old.GetId() {
		t.Fatalf("while the old allocation may still run: %d allocations %v, want only the old one, stopped", len(allocs), allocs)
	}

	if err := agent.report(ctx, []*droverv1.AllocClientUpdate{{AllocId: old.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE}}); err != nil {
		t.Fatal(err)
	}
	var placed *droverv1.Allocation
	poll(ctx, t, "the new version placed once the old allocation completed", func() (bool, string) {
		allocs, err := jobAllocs(ctx, conn, job.GetId())
		if err != nil {
			return false, err.Error()
		}
		for _, a := range allocs {
			if a.GetId() != old.GetId() && !a.Terminal() {
				placed = a
				return true, ""
			}
		}
		return false, "not placed"
	})
	if got := placed.GetResources().GetPorts(); len(got) != 1 || got[0].GetValue() != 8080 {
		t.Errorf("new allocation ports %v, want 8080", got)
	}
	if placed.GetNodeId() != node.GetId() {
		t.Errorf("new allocation on node %s, want %s", placed.GetNodeId(), node.GetId())
	}
	if placed.GetResources().GetIp() == old.GetResources().GetIp() {
		t.Errorf("new allocation took the address %s just released; released addresses go to the back of the free list", placed.GetResources().GetIp())
	}
}

// TestDownNodesGarbageCollected lets two nodes go down. One held only an
// allocation that had completed; the other's allocation is still running
// as far as the servers know, because the schedulers were paused before it
// went down and nobody has marked it lost. The first node is collected once
// the node GC threshold has passed; the second stays, even when a forced
// collection runs, until the schedulers mark its allocation lost.
func TestDownNodesGarbageCollected(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.Args(
		"-heartbeat-min-ttl", "300ms", "-heartbeat-grace", "300ms", "-heartbeat-max-per-second", "100000",
		"-heartbeat-mass-failure-fraction", "0",
		"-gc-interval", "300ms", "-node-gc-threshold", "1s",
	))
	ctx := within(t, testContext(t), 90*time.Second)
	c.WaitLeader(ctx)
	conn := c.Server(1).Conn()
	agents, stopAgents := context.WithCancel(ctx)
	done := &reconnectAgent{conn: conn, node: mock.Node()}
	busy := &reconnectAgent{conn: conn, node: mock.Node()}
	// stopBoth silences both nodes' agents, and returns once no call of
	// theirs is still in flight.
	stopBoth := func() {
		stopAgents()
		for _, a := range []*reconnectAgent{done, busy} {
			if err := a.wait(); err != nil {
				t.Error(err)
			}
		}
	}
	defer stopBoth()
	for _, a := range []*reconnectAgent{done, busy} {
		if err := a.register(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.heartbeatOnce(ctx); err != nil {
			t.Fatal(err)
		}
		a.goLoops(agents)
	}
	pinned := func(n *droverv1.Node) *droverv1.Job {
		j := mock.Job(1)
		j.Constraints = []*droverv1.Constraint{{Attribute: "node.id", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: n.GetId()}}
		if _, err := registerJob(ctx, conn, j, ""); err != nil {
			t.Fatal(err)
		}
		return j
	}
	doneJob, busyJob := pinned(done.node), pinned(busy.node)
	for _, j := range []*droverv1.Job{doneJob, busyJob} {
		poll(ctx, t, "job "+j.GetId()+" running", func() (bool, string) {
			allocs, err := jobAllocs(ctx, conn, j.GetId())
			return err == nil && len(filterAllocs(allocs, isRunningWanted)) == 1, "not running"
		})
	}
	// The first node's work ends: the job is stopped and its agent reports
	// the allocation complete.
	if _, err := droverv1.NewJobServiceClient(conn).Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: doneJob.GetId()}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the stopped job's allocation complete", func() (bool, string) {
		allocs, err := jobAllocs(ctx, conn, doneJob.GetId())
		return err == nil && len(allocs) == 1 && allocs[0].ClientTerminal(), "not complete"
	})
	for _, s := range c.Servers() {
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(true)})
	}
	stopBoth()

	poll(ctx, t, "the node whose allocations ended collected", func() (bool, string) {
		_, err := droverv1.NewNodeServiceClient(conn).Get(ctx, &droverv1.GetNodeRequest{NodeId: done.node.GetId()})
		return status.Code(err) == codes.NotFound, "still there: " + status.Code(err).String()
	})
	gc, err := droverv1.NewOperatorServiceClient(conn).GarbageCollect(ctx, &droverv1.GarbageCollectRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := droverv1.NewNodeServiceClient(conn).Get(ctx, &droverv1.GetNodeRequest{NodeId: busy.node.GetId()})
	if err != nil {
		t.Fatalf("node with a running allocation after a forced collection (%v): %v", gc, err)
	}
	if got.GetNode().GetStatus() != droverv1.NodeStatus_NODE_STATUS_DOWN {
		t.Fatalf("node with a running allocation is %s, want down", got.GetNode().GetStatus())
	}

	for _, s := range c.Servers() {
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(false)})
	}
	poll(ctx, t, "the down node's allocation lost and the node collected", func() (bool, string) {
		_, err := droverv1.NewNodeServiceClient(conn).Get(ctx, &droverv1.GetNodeRequest{NodeId: busy.node.GetId()})
		return status.Code(err) == codes.NotFound, "still there: " + status.Code(err).String()
	})
}
