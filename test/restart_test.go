package test_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
	"github.com/droverhq/drover/test/cluster"
)

// TestProcessRestartKeepsState checks that a `drover server` process
// restarted from its data dir holds every node, job, allocation and
// evaluation it had.
//
// No API creates allocations until the plan applier exists, so the data dir
// is first written by the same server code run inside the test, which can
// apply plan results through raft; then the real binary is started on it
// (without -server-id: it must take the data dir's identity), stopped with
// SIGTERM, and started again. Each time, everything the API shows must be
// what was written.
func TestProcessRestartKeepsState(t *testing.T) {
	var (
		seededID string
		nodes    []*droverv1.Node
		want     view
	)
	// The test compares what it wrote with what the API shows after each
	// restart: no scheduler may change the state in between.
	c := cluster.New(t, droverBin, 1, cluster.Bootstrap(), cluster.ServerIDFromDataDir(),
		cluster.Snapshots(16, 100*time.Millisecond, 4), cluster.Args("-num-schedulers", "0"),
		cluster.BeforeFirstStart(func(s *cluster.Server) {
			seeded := testserver.Start(t, func(c *server.Config) {
				c.DataDir = s.DataDir()
				c.Scheduler.NumWorkers = 0
				c.RaftAddr = s.RaftAddr()
				c.SnapshotThreshold = 16
				c.SnapshotInterval = 100 * time.Millisecond
				c.TrailingLogs = 4
			})
			nodes = seed(t, seeded)
			want = apiView(t, seeded.Conn, nodes)
			seededID = seeded.ID()
			if err := seeded.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}))
	ctx := testContext(t)
	s := c.Server(1)
	if s.ID() != seededID {
		t.Errorf("server id %s, want the data dir's %s", s.ID(), seededID)
	}
	c.WaitLeader(ctx)
	want.compare(t, "first start of the process", apiView(t, s.Conn(), nodes))

	// More writes through the process itself, then a restart.
	extra := mock.Job(2)
	if _, err := droverv1.NewJobServiceClient(s.Conn()).Register(ctx, &droverv1.RegisterJobRequest{Job: extra}); err != nil {
		t.Fatal(err)
	}
	if _, err := droverv1.NewJobServiceClient(s.Conn()).Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: extra.GetId()}); err != nil {
		t.Fatal(err)
	}
	want = apiView(t, s.Conn(), nodes)
	s.Stop()
	if _, err := os.Stat(s.DataDir()); err != nil {
		t.Fatalf("data dir gone after a clean stop: %v", err)
	}

	s.Restart()
	c.WaitLeader(ctx)
	want.compare(t, "restart of the process", apiView(t, s.Conn(), nodes))
	s.StopWith(syscall.SIGINT)
}

// seed writes nodes in several statuses, jobs with versions and a stop,
// allocations placed, reported and stopped, and evaluations.
func seed(t *testing.T, srv *testserver.Server) []*droverv1.Node {
	t.Helper()
	ctx := testContext(t)
	nodeAPI := droverv1.NewNodeServiceClient(srv.Conn)
	jobAPI := droverv1.NewJobServiceClient(srv.Conn)
	var nodes []*droverv1.Node
	for i := range 6 {
		n := mock.Node()
		if _, err := nodeAPI.Register(ctx, &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := nodeAPI.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY}); err != nil {
				t.Fatal(err)
			}
		}
		nodes = append(nodes, n)
	}
	for i := range 4 {
		j := mock.Job(3)
		if _, err := jobAPI.Register(ctx, &droverv1.RegisterJobRequest{Job: j.CloneVT()}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			j.TaskGroups[0].Count = 5
			if _, err := jobAPI.Register(ctx, &droverv1.RegisterJobRequest{Job: j.CloneVT()}); err != nil {
				t.Fatal(err)
			}
		}
		job := srv.State().Snapshot().JobByID(j.GetId())
		entry := &droverv1.PlanResultEntry{AppliedAt: time.Now().UnixNano()}
		for k := range 3 {
			entry.Allocations = append(entry.Allocations, mock.Alloc(nodes[(i+k)%len(nodes)], job, k))
		}
		if _, _, err := srv.Apply(ctx, droverv1.MessageTypePlanResult, entry); err != nil {
			t.Fatal(err)
		}
		a := entry.GetAllocations()[0]
		owner := nodes[i%len(nodes)]
		if _, err := nodeAPI.UpdateAlloc(ctx, &droverv1.UpdateAllocRequest{NodeId: owner.GetId(), SecretId: owner.GetSecretId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: a.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}}}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			stop := &droverv1.PlanResultEntry{Stops: []*droverv1.AllocStop{{AllocId: entry.GetAllocations()[1].GetId(),
				DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST}}}
			if _, _, err := srv.Apply(ctx, droverv1.MessageTypePlanResult, stop); err != nil {
				t.Fatal(err)
			}
		}
		if i == 2 {
			if _, err := jobAPI.Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: j.GetId()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return nodes
}

// view is what the API shows: every job, evaluation and allocation, and
// each node's allocations and status.
type view struct {
	jobs        *droverv1.ListJobsResponse
	evals       *droverv1.ListEvaluationsResponse
	allocs      *droverv1.ListAllocationsResponse
	nodeAllocs  []*droverv1.GetAllocsResponse
	nodeStatus  []droverv1.NodeStatus
	eligibility []droverv1.SchedulingEligibility
}

func apiView(t *testing.T, conn grpc.ClientConnInterface, nodes []*droverv1.Node) view {
	t.Helper()
	ctx := testContext(t)
	var v view
	var err error
	if v.jobs, err = droverv1.NewJobServiceClient(conn).List(ctx, &droverv1.ListJobsRequest{}); err != nil {
		t.Fatal(err)
	}
	if v.evals, err = droverv1.NewEvalServiceClient(conn).List(ctx, &droverv1.ListEvaluationsRequest{}); err != nil {
		t.Fatal(err)
	}
	if v.allocs, err = droverv1.NewAllocServiceClient(conn).List(ctx, &droverv1.ListAllocationsRequest{}); err != nil {
		t.Fatal(err)
	}
	// Query metadata may differ (a restarted server learns its leader
	// anew); compare the objects only.
	v.jobs.Meta, v.evals.Meta, v.allocs.Meta = nil, nil, nil
	nodeAPI := droverv1.NewNodeServiceClient(conn)
	for _, n := range nodes {
		got, err := nodeAPI.GetAllocs(ctx, &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId()})
		if err != nil {
			t.Fatal(err)
		}
		// A restore from a raft snapshot may raise the index (never lower
		// it), and the state an answer is read from moves with every
		// write; the allocations and jobs must be the same.
		got.Index, got.StateIndex = 0, 0
		v.nodeAllocs = append(v.nodeAllocs, got)
		// Re-registering an unchanged node reads its status without writing.
		reg, err := nodeAPI.Register(ctx, &droverv1.RegisterNodeRequest{Node: n.CloneVT()})
		if err != nil {
			t.Fatal(err)
		}
		v.nodeStatus = append(v.nodeStatus, reg.GetStatus())
		v.eligibility = append(v.eligibility, reg.GetSchedulingEligibility())
	}
	return v
}

func (want view) compare(t *testing.T, when string, got view) {
	t.Helper()
	if len(want.allocs.GetAllocations()) == 0 {
		t.Fatalf("%s: nothing to compare, the seed wrote no allocations", when)
	}
	if !proto.Equal(want.jobs, got.jobs) {
		t.Errorf("%s: jobs differ", when)
	}
	if !proto.Equal(want.evals, got.evals) {
		t.Errorf("%s: evaluations differ", when)
	}
	if !proto.Equal(want.allocs, got.allocs) {
		t.Errorf("%s: allocations differ", when)
	}
	for i := range want.nodeAllocs {
		if !proto.Equal(want.nodeAllocs[i], got.nodeAllocs[i]) {
			t.Errorf("%s: node %d's allocations differ", when, i)
		}
		if want.nodeStatus[i] != got.nodeStatus[i] || want.eligibility[i] != got.eligibility[i] {
			t.Errorf("%s: node %d is %s/%s, was %s/%s", when, i, got.nodeStatus[i], got.eligibility[i], want.nodeStatus[i], want.eligibility[i])
		}
	}
}

// TestDevServerCleansUp checks that a dev server removes its temporary data
// dir when stopped with SIGINT (Ctrl-C).
func TestDevServerCleansUp(t *testing.T) {
	c := cluster.New(t, droverBin, 1, cluster.Dev())
	s := c.Server(1)
	dir := s.Info().DataDir
	if !strings.Contains(filepath.Base(dir), "drover-dev-") {
		t.Fatalf("dev data dir %q: want a temporary drover-dev-* directory", dir)
	}
	// Should the test fail before the server removes it.
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("dev data dir %s: %v", dir, err)
	}
	s.StopWith(syscall.SIGINT)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dev data dir %s still there after SIGINT (%v)", dir, err)
	}
}
