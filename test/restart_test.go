package test_test

import (
	"os"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestProcessRestartKeepsState runs a real server process, fills it through
// its API, stops it with SIGTERM and starts it again on the same data dir:
// every node, job and evaluation must be as it was.
func TestProcessRestartKeepsState(t *testing.T) {
	dataDir := t.TempDir()
	first := startProcess(t, "-data-dir", dataDir, "-bootstrap", "-rpc-addr", "127.0.0.1:0", "-raft-addr", "127.0.0.1:0",
		"-snapshot-threshold", "16", "-snapshot-interval", "100ms", "-trailing-logs", "4")
	ctx := testContext(t)
	nodes := droverv1.NewNodeServiceClient(first.conn)
	jobs := droverv1.NewJobServiceClient(first.conn)

	var registered []*droverv1.Node
	for i := range 8 {
		n := mock.Node()
		if _, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := nodes.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY}); err != nil {
				t.Fatal(err)
			}
		}
		registered = append(registered, n)
	}
	for i := range 5 {
		j := mock.Job(int32(i + 1))
		if _, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: j.CloneVT()}); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			j.TaskGroups[0].Count = 9
			if _, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: j}); err != nil {
				t.Fatal(err)
			}
		case 1:
			if _, err := jobs.Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: j.GetId()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := apiView(t, first)
	first.stop(t, syscall.SIGTERM)
	if _, err := os.Stat(dataDir); err != nil {
		t.Fatalf("data dir gone after a clean stop: %v", err)
	}

	second := startProcess(t, "-data-dir", dataDir, "-rpc-addr", "127.0.0.1:0", "-raft-addr", first.info.RaftAddr)
	if second.info.ServerID != first.info.ServerID {
		t.Errorf("server id %s after restart, want %s", second.info.ServerID, first.info.ServerID)
	}
	after := apiView(t, second)
	if !proto.Equal(before.jobs, after.jobs) {
		t.Errorf("jobs differ after restart")
	}
	if !proto.Equal(before.evals, after.evals) {
		t.Errorf("evaluations differ after restart")
	}
	// Nodes: their statuses survived, and a heartbeat of a ready node
	// changes nothing.
	nodes = droverv1.NewNodeServiceClient(second.conn)
	for i, n := range registered {
		resp, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: n.CloneVT()})
		if err != nil {
			t.Fatalf("node %d after restart: %v", i, err)
		}
		want := droverv1.NodeStatus_NODE_STATUS_INITIALIZING
		if i%2 == 0 {
			want = droverv1.NodeStatus_NODE_STATUS_READY
		}
		if resp.GetStatus() != want {
			t.Errorf("node %d: status %s after restart, want %s", i, resp.GetStatus(), want)
		}
	}
	second.stop(t, syscall.SIGINT)
}

// TestDevServerCleansUp checks that a dev server removes its temporary data
// dir when stopped with SIGINT (Ctrl-C).
func TestDevServerCleansUp(t *testing.T) {
	p := startProcess(t, "-dev", "-rpc-addr", "127.0.0.1:0", "-raft-addr", "127.0.0.1:0")
	if _, err := os.Stat(p.info.DataDir); err != nil {
		t.Fatalf("dev data dir %s: %v", p.info.DataDir, err)
	}
	p.stop(t, syscall.SIGINT)
	if _, err := os.Stat(p.info.DataDir); !os.IsNotExist(err) {
		t.Errorf("dev data dir %s still there after SIGINT (%v)", p.info.DataDir, err)
	}
}

// view is what the API shows of the jobs and evaluations.
type view struct {
	jobs  *droverv1.ListJobsResponse
	evals *droverv1.ListEvaluationsResponse
}

func apiView(t *testing.T, p *process) view {
	t.Helper()
	ctx := testContext(t)
	jobs, err := droverv1.NewJobServiceClient(p.conn).List(ctx, &droverv1.ListJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	evals, err := droverv1.NewEvalServiceClient(p.conn).List(ctx, &droverv1.ListEvaluationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Query metadata may differ (a restarted server knows its leader anew);
	// compare the objects only.
	jobs.Meta, evals.Meta = nil, nil
	return view{jobs: jobs, evals: evals}
}
