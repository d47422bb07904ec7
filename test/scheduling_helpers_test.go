package test_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/invariant"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// readyNodes registers count nodes through conn and heartbeats each once,
// which makes a node without allocations ready for placements.
func readyNodes(ctx context.Context, t testing.TB, conn grpc.ClientConnInterface, count int) []*droverv1.Node {
	t.Helper()
	nodes := registerNodes(ctx, t, conn, count, 8)
	for _, n := range nodes {
		heartbeat(ctx, t, conn, n)
	}
	return nodes
}

// heartbeat reports n ready, retrying through elections.
func heartbeat(ctx context.Context, t testing.TB, conn grpc.ClientConnInterface, n *droverv1.Node) {
	t.Helper()
	retryUnavailable(ctx, t, "heartbeat of node "+n.GetId(), func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := droverv1.NewNodeServiceClient(conn).UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{
			NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY,
		})
		return err
	})
}

// jobAllocs lists every allocation of a job as conn's server sees it.
func jobAllocs(ctx context.Context, conn grpc.ClientConnInterface, jobID string) ([]*droverv1.Allocation, error) {
	var out []*droverv1.Allocation
	token := ""
	for {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := droverv1.NewJobServiceClient(conn).Allocations(ctx, &droverv1.ListJobAllocationsRequest{
			JobId: jobID, Page: &droverv1.PageOptions{NextToken: token, PageSize: 1000},
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("allocations of job %s: %w", jobID, err)
		}
		out = append(out, resp.GetAllocations()...)
		if token = resp.GetNextToken(); token == "" {
			return out, nil
		}
	}
}

// wantedRunning counts allocations the servers want running that have not
// ended on their node.
func wantedRunning(allocs []*droverv1.Allocation) int {
	n := 0
	for _, a := range allocs {
		if a.GetDesiredStatus() == droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN && !a.ClientTerminal() {
			n++
		}
	}
	return n
}

// waitPlaced waits until the job has exactly want allocations wanted
// running, as s sees it.
func waitPlaced(ctx context.Context, t testing.TB, s *cluster.Server, jobID string, want int) []*droverv1.Allocation {
	t.Helper()
	var allocs []*droverv1.Allocation
	poll(ctx, t, fmt.Sprintf("job %s placed %d allocations", jobID, want), func() (bool, string) {
		var err error
		allocs, err = jobAllocs(ctx, s.Conn(), jobID)
		if err != nil {
			return false, err.Error()
		}
		got := wantedRunning(allocs)
		return got == want, fmt.Sprintf("%d allocations wanted running", got)
	})
	return allocs
}

// waitEvaluated waits, after a job's placement (allocs), until the writes
// it sets off are over as s sees them: every evaluation of the job is done
// and, when the placement started a deployment, the deployment watcher's
// evaluation of it (written once the watcher sees the deployment, and
// processed after the placing evaluation) is among them. A test that
// compares states taken after this sees no write of the job's land in
// between.
func waitEvaluated(ctx context.Context, t *testing.T, s *cluster.Server, jobID string, allocs []*droverv1.Allocation) {
	t.Helper()
	deployed := slices.ContainsFunc(allocs, func(a *droverv1.Allocation) bool { return a.GetDeploymentId() != "" })
	poll(ctx, t, "every evaluation of job "+jobID+" done", func() (bool, string) {
		watched := false
		for _, e := range listEvals(ctx, t, s) {
			if e.GetJobId() != jobID {
				continue
			}
			if !e.Terminal() {
				return false, fmt.Sprintf("evaluation %s is %s", e.GetId(), e.GetStatus())
			}
			watched = watched || e.GetTriggeredBy() == droverv1.EvalTrigger_EVAL_TRIGGER_DEPLOYMENT
		}
		if deployed && !watched {
			return false, "the deployment watcher has not evaluated the job's deployment yet"
		}
		return true, ""
	})
}

// checkInvariants rebuilds the cluster's state as s sees it (the nodes the
// test registered, every job and allocation) and fails the test on any
// violation of the placement invariants.
func checkInvariants(ctx context.Context, t *testing.T, s *cluster.Server, nodes []*droverv1.Node, jobIDs ...string) {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Restore()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := r.Node(n.CloneVT()); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range jobIDs {
		resp, err := droverv1.NewJobServiceClient(s.Conn()).Get(ctx, &droverv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatalf("get job %s: %v", id, err)
		}
		if err := r.Job(resp.GetJob()); err != nil {
			t.Fatal(err)
		}
		if err := r.JobVersion(resp.GetJob()); err != nil {
			t.Fatal(err)
		}
		allocs, err := jobAllocs(ctx, s.Conn(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range allocs {
			if err := r.Alloc(a); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.Commit(1)
	for _, err := range invariant.Check(st.Snapshot()) {
		t.Error(err)
	}
}

// setWorkers changes one server's worker pool.
func setWorkers(ctx context.Context, t *testing.T, s *cluster.Server, req *droverv1.UpdateSchedulerWorkersRequest) *droverv1.SchedulerWorkersResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := droverv1.NewOperatorServiceClient(s.Conn()).UpdateSchedulerWorkers(ctx, req)
	if err != nil {
		t.Fatalf("update workers of %s: %v", s, err)
	}
	if req.GetPaused() {
		// A worker already waiting in a dequeue parks only after it.
		poll(ctx, t, "workers of "+s.ID()+" parked", func() (bool, string) {
			resp, err = droverv1.NewOperatorServiceClient(s.Conn()).SchedulerWorkers(ctx, &droverv1.SchedulerWorkersRequest{})
			if err != nil {
				return false, err.Error()
			}
			for _, w := range resp.GetWorkers() {
				if w.GetStatus() != "paused" {
					return false, "worker " + w.GetId() + " is " + w.GetStatus()
				}
			}
			return true, ""
		})
	}
	return resp
}

// acked sums the evaluations s's workers have acknowledged.
func acked(ctx context.Context, t *testing.T, s *cluster.Server) (acked, nacked uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := droverv1.NewOperatorServiceClient(s.Conn()).SchedulerWorkers(ctx, &droverv1.SchedulerWorkersRequest{})
	if err != nil {
		t.Fatalf("workers of %s: %v", s, err)
	}
	for _, w := range resp.GetWorkers() {
		acked += w.GetEvalsAcked()
		nacked += w.GetEvalsNacked()
	}
	return acked, nacked
}

func ptr[T any](v T) *T { return &v }
