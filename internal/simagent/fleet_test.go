package simagent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 30 * time.Second

// waitFor polls cond until it holds, failing the test with its last
// explanation after waitTimeout.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %s: %s", what, waitTimeout, why)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startFleet runs a fleet of n nodes against addrs until the test ends.
func startFleet(t *testing.T, addrs []string, n int, adjust func(*simagent.Config)) *simagent.Fleet {
	t.Helper()
	cfg := simagent.Config{Servers: addrs, Nodes: simagent.DefaultTemplate().Nodes(n)}
	if adjust != nil {
		adjust(&cfg)
	}
	f, err := simagent.NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// waitReady waits until the servers (as srv sees them) and the fleet agree
// that every node is ready.
func waitReady(t *testing.T, srv *testserver.Server, f *simagent.Fleet) {
	t.Helper()
	n := len(f.Agents())
	waitFor(t, fmt.Sprintf("%d nodes ready", n), func() (bool, string) {
		snap := srv.State().Snapshot()
		ready := 0
		for _, a := range f.Agents() {
			if node := snap.NodeByID(a.Node().ID); node.GetStatus() == droverv1.NodeStatus_NODE_STATUS_READY {
				ready++
			}
		}
		agents := f.Stats().NodeStatuses[droverv1.NodeStatus_NODE_STATUS_READY]
		return ready == n && agents == n, fmt.Sprintf("%d ready on the server, %d agents told ready", ready, agents)
	})
}

// jobAllocs counts the job's allocations by client status, as srv sees them.
func jobAllocs(srv *testserver.Server, jobID string) map[droverv1.AllocClientStatus]int {
	allocs, _ := srv.State().Snapshot().AllocsByJob(jobID)
	out := make(map[droverv1.AllocClientStatus]int)
	for _, a := range allocs {
		out[a.GetClientStatus()]++
	}
	return out
}

func registerJob(t *testing.T, srv *testserver.Server, job *droverv1.Job) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if _, err := droverv1.NewJobServiceClient(srv.Conn).Register(ctx, &droverv1.RegisterJobRequest{Job: job, RequestId: uuid.NewString()}); err != nil {
		t.Fatalf("register job %s: %v", job.GetId(), err)
	}
}

func TestFleetRunsAndStopsAServiceJob(t *testing.T) {
	srv := testserver.Start(t)
	f := startFleet(t, []string{srv.RPCAddr()}, 50, func(c *simagent.Config) { c.StartDelay = 50 * time.Millisecond })
	waitReady(t, srv, f)

	job := mock.Job(20)
	registerJob(t, srv, job)
	running := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	waitFor(t, "20 allocations running", func() (bool, string) {
		got := jobAllocs(srv, job.GetId())
		agents := f.Stats().AllocStatuses[running]
		return got[running] == 20 && agents == 20, fmt.Sprintf("server: %v, agents: %d running", got, agents)
	})

	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if _, err := droverv1.NewJobServiceClient(srv.Conn).Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: job.GetId(), RequestId: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	complete := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	// The agents keep finished allocations until the servers collect them.
	waitFor(t, "20 allocations complete", func() (bool, string) {
		got := jobAllocs(srv, job.GetId())
		st := f.Stats()
		return got[complete] == 20 && st.AllocStatuses[complete] == 20 && len(st.AllocStatuses) == 1,
			fmt.Sprintf("server: %v, agents: %v", got, st.AllocStatuses)
	})
	// The servers apply a report before its call returns, and one batch
	// can carry all twenty, so the fleet may count the calls a moment
	// after the state shows them.
	waitFor(t, "the fleet's reports of running and complete counted", func() (bool, string) {
		st := f.Stats()
		return st.ReportCalls > 0 && st.AllocReports >= 40 && st.Polls > 0,
			fmt.Sprintf("%d report calls of %d changes, %d polls", st.ReportCalls, st.AllocReports, st.Polls)
	})
}

func TestFleetCompletesBatchWork(t *testing.T) {
	srv := testserver.Start(t)
	f := startFleet(t, []string{srv.RPCAddr()}, 5, func(c *simagent.Config) { c.BatchRunTime = 200 * time.Millisecond })
	waitReady(t, srv, f)

	job := mock.JobOfType(droverv1.JobType_JOB_TYPE_BATCH, 10)
	job.TaskGroups[0].Resources.Ports = nil
	registerJob(t, srv, job)
	complete := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	waitFor(t, "10 batch allocations complete", func() (bool, string) {
		got := jobAllocs(srv, job.GetId())
		return got[complete] == 10, fmt.Sprintf("server: %v", got)
	})
}

// TestFleetReconnectsADisconnectedNode disconnects a node as the leader
// would: its allocation becomes unknown, the agent's report of it is
// refused until the agent heartbeats, and then the node is admitted back
// with its allocation running.
func TestFleetReconnectsADisconnectedNode(t *testing.T) {
	srv := testserver.Start(t)
	f := startFleet(t, []string{srv.RPCAddr()}, 3, nil)
	waitReady(t, srv, f)

	job := mock.Job(3)
	job.TaskGroups[0].MaxClientDisconnect = durationpb.New(time.Hour)
	registerJob(t, srv, job)
	running := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	waitFor(t, "3 allocations running", func() (bool, string) {
		got := jobAllocs(srv, job.GetId())
		return got[running] == 3, fmt.Sprintf("server: %v", got)
	})

	allocs, _ := srv.State().Snapshot().AllocsByJob(job.GetId())
	nodeID := allocs[0].GetNodeId()
	node := srv.State().Snapshot().NodeByID(nodeID)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if _, _, err := srv.Apply(ctx, droverv1.MessageTypeNodeStatus, &droverv1.NodeStatusEntry{
		NodeId: nodeID, Status: droverv1.NodeStatus_NODE_STATUS_DISCONNECTED, ExpectedModifyIndex: node.GetModifyIndex(),
		UpdatedAt: time.Now().UnixNano(),
	}); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "the node ready again with its allocations running", func() (bool, string) {
		snap := srv.State().Snapshot()
		n := snap.NodeByID(nodeID)
		got := jobAllocs(srv, job.GetId())
		return n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_READY && got[running] == 3,
			fmt.Sprintf("node %s, allocations %v", n.GetStatus(), got)
	})
	st := f.Stats()
	t.Logf("reports refused while disconnected: %d", st.ReportsRefused)
	if st.HeartbeatsFailed != 0 {
		t.Errorf("%d heartbeats failed, want none", st.HeartbeatsFailed)
	}
}

// TestFleetFailsOverToTheNewLeader shuts the leader of a 3-server cluster
// down: every agent must then have a heartbeat accepted by the new leader,
// and no node may be marked.
func TestFleetFailsOverToTheNewLeader(t *testing.T) {
	servers := testserver.StartCluster(t, 3, func(c *server.Config) {
		c.Heartbeat.MinTTL = time.Second
		c.Heartbeat.Grace = time.Second
	})
	var addrs []string
	var leader *testserver.Server
	for _, s := range servers {
		addrs = append(addrs, s.RPCAddr())
		if s.Leader().Local {
			leader = s
		}
	}
	if leader == nil {
		t.Fatal("no leader among the servers")
	}
	f := startFleet(t, addrs, 30, func(c *simagent.Config) { c.HeartbeatOnly = true })
	waitReady(t, servers[0], f)

	shutdown := time.Now()
	if err := leader.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var survivor *testserver.Server
	for _, s := range servers {
		if s != leader {
			survivor = s
		}
	}
	waitFor(t, "every agent heartbeating the new leader", func() (bool, string) {
		n := f.HeartbeatedSince(shutdown)
		return n == 30, fmt.Sprintf("%d of 30", n)
	})
	snap := survivor.State().Snapshot()
	for _, a := range f.Agents() {
		if st := snap.NodeByID(a.Node().ID).GetStatus(); st != droverv1.NodeStatus_NODE_STATUS_READY {
			t.Errorf("node %s is %s after the failover, want ready", a.Node().ID, st)
		}
	}
	if st := f.Stats(); st.Polls != 0 || st.ReportCalls != 0 {
		t.Errorf("a heartbeat-only fleet polled %d times and reported %d times", st.Polls, st.ReportCalls)
	}
}

func TestNewFleetRejectsBadConfigs(t *testing.T) {
	nodes := simagent.DefaultTemplate().Nodes(2)
	for _, tc := range []struct {
		name string
		cfg  simagent.Config
	}{
		{"no servers", simagent.Config{Nodes: nodes}},
		{"no nodes", simagent.Config{Servers: []string{"127.0.0.1:1"}}},
		{"duplicate node", simagent.Config{Servers: []string{"127.0.0.1:1"}, Nodes: []simagent.Node{nodes[0], nodes[0]}}},
		{"heartbeat fractions", simagent.Config{Servers: []string{"127.0.0.1:1"}, Nodes: nodes, HeartbeatMin: 0.9, HeartbeatMax: 0.5}},
		{"negative start delay", simagent.Config{Servers: []string{"127.0.0.1:1"}, Nodes: nodes, StartDelay: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f, err := simagent.NewFleet(tc.cfg); err == nil {
				f.Stop()
				t.Fatal("NewFleet accepted the config")
			}
		})
	}
}
