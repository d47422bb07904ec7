package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// TestRestartKeepsEverything fills a server with nodes, jobs, evaluations
// and allocations in every state, restarts it on its data dir, and checks
// that every table is identical afterwards. The snapshot threshold is low,
// so the restart restores a raft snapshot and replays the log after it.
func TestRestartKeepsEverything(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) {
		c.SnapshotThreshold = 40
		c.SnapshotInterval = 50 * time.Millisecond
		c.TrailingLogs = 10
		// The test writes allocations itself; workers scheduling the
		// jobs meanwhile would change the state it compares.
		c.Scheduler.NumWorkers = 0
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	jobs := droverv1.NewJobServiceClient(srv.Conn)

	var ns []*droverv1.Node
	for range 10 {
		n := mock.Node()
		must(t, call(nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: n.CloneVT()})))
		must(t, call(nodes.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY})))
		ns = append(ns, n)
	}
	var js []*droverv1.Job
	for i := range 4 {
		j := mock.Job(3)
		must(t, call(jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: j.CloneVT()})))
		if i == 0 {
			j.TaskGroups[0].Count = 6
			must(t, call(jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: j.CloneVT()})))
		}
		js = append(js, srv.State().Snapshot().JobByID(j.GetId()))
	}
	for i, j := range js {
		entry := &droverv1.PlanResultEntry{AppliedAt: time.Now().UnixNano()}
		for k := range 6 {
			entry.Allocations = append(entry.Allocations, mock.Alloc(ns[(i+k)%len(ns)], j, k))
		}
		if _, _, err := srv.Apply(ctx, droverv1.MessageTypePlanResult, entry); err != nil {
			t.Fatal(err)
		}
		for _, a := range entry.GetAllocations() {
			n := ns[indexOf(ns, a.GetNodeId())]
			must(t, call(nodes.UpdateAlloc(ctx, &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
				Allocs: []*droverv1.AllocClientUpdate{{AllocId: a.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}}})))
		}
	}
	must(t, call(jobs.Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: js[3].GetId()})))
	if _, _, err := srv.Apply(ctx, droverv1.MessageTypeNodeStatus, &droverv1.NodeStatusEntry{
		NodeId: ns[0].GetId(), Status: droverv1.NodeStatus_NODE_STATUS_DOWN, UpdatedAt: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	waitForSnapshot(t, srv.Config.DataDir)

	before, err := srv.State().Snapshot().Digest()
	if err != nil {
		t.Fatal(err)
	}
	latest := srv.State().LatestIndex()
	restarted := srv.Restart(t)
	if got := restarted.State().LatestIndex(); got != latest {
		t.Errorf("latest index after restart = %d, want %d", got, latest)
	}
	after, err := restarted.State().Snapshot().Digest()
	if err != nil {
		t.Fatal(err)
	}
	for table, d := range before {
		if after[table] != d {
			t.Errorf("table %s differs after restart", table)
		}
	}
	// The restarted server answers through its API from the same state.
	got, err := droverv1.NewJobServiceClient(restarted.Conn).Get(ctx, &droverv1.GetJobRequest{JobId: js[3].GetId()})
	if err != nil || !got.GetJob().GetStop() {
		t.Errorf("stopped job after restart: %v, err %v", got.GetJob(), err)
	}
	hb, err := droverv1.NewNodeServiceClient(restarted.Conn).UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{
		NodeId: ns[1].GetId(), SecretId: ns[1].GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY})
	if err != nil || hb.GetStatus() != droverv1.NodeStatus_NODE_STATUS_READY || hb.GetIndex() != 0 {
		t.Errorf("heartbeat of a ready node after restart: %v at %d, err %v; want ready without a write", hb.GetStatus(), hb.GetIndex(), err)
	}
}

// waitForSnapshot waits until raft has written a snapshot in the data dir.
func waitForSnapshot(t testing.TB, dataDir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		entries, _ := os.ReadDir(filepath.Join(dataDir, "raft", "snapshots"))
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(dataDir, "raft", "snapshots", e.Name(), "state.bin")); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("raft wrote no snapshot")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func indexOf(nodes []*droverv1.Node, id string) int {
	for i, n := range nodes {
		if n.GetId() == id {
			return i
		}
	}
	return -1
}

func call[T any](_ T, err error) error { return err }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
