package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// waitLeader returns the server that is the ready leader, once exactly one
// of servers is.
func waitLeader(t testing.TB, servers []*testserver.Server) *testserver.Server {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var leaders []*testserver.Server
		for _, s := range servers {
			if s.Leader().Ready {
				leaders = append(leaders, s)
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no single ready leader within 30s")
	return nil
}

// waitRecorded waits until the leader's state records every server, which
// each one does by announcing itself after the cluster forms.
func waitRecorded(t *testing.T, leader *testserver.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := 0
		for range leader.State().Snapshot().Servers() {
			got++
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader records %d servers after 30s, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func followers(servers []*testserver.Server, leader *testserver.Server) []*testserver.Server {
	var out []*testserver.Server
	for _, s := range servers {
		if s != leader {
			out = append(out, s)
		}
	}
	return out
}

// TestClusterFormsAndForwards forms a 3-server cluster from bootstrap-expect
// and join alone, then writes through a follower and reads the write back
// from the other follower without allowing stale answers.
func TestClusterFormsAndForwards(t *testing.T) {
	servers := testserver.StartCluster(t, 3)
	leader := waitLeader(t, servers)
	fs := followers(servers, leader)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	n := mock.Node()
	if _, err := droverv1.NewNodeServiceClient(fs[0].Conn).Register(ctx, &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
		t.Fatalf("register through follower %s: %v", fs[0].ID(), err)
	}
	job := mock.Job(2)
	reg, err := droverv1.NewJobServiceClient(fs[0].Conn).Register(ctx, &droverv1.RegisterJobRequest{Job: job, RequestId: "req-1"})
	if err != nil {
		t.Fatalf("register job through follower: %v", err)
	}
	got, err := droverv1.NewJobServiceClient(fs[1].Conn).Get(ctx, &droverv1.GetJobRequest{JobId: job.GetId()})
	if err != nil {
		t.Fatalf("consistent read through the other follower: %v", err)
	}
	if got.GetJob().GetJobModifyIndex() != reg.GetJobModifyIndex() {
		t.Fatalf("read job modify index %d, registered %d", got.GetJob().GetJobModifyIndex(), reg.GetJobModifyIndex())
	}
	// A retry of the same request through another server is answered with
	// the first result and writes nothing.
	again, err := droverv1.NewJobServiceClient(fs[1].Conn).Register(ctx, &droverv1.RegisterJobRequest{Job: job, RequestId: "req-1"})
	if err != nil {
		t.Fatalf("retry job register: %v", err)
	}
	if again.GetEvalId() != reg.GetEvalId() || again.GetIndex() != reg.GetIndex() {
		t.Fatalf("retry answered eval %s at %d, first answer eval %s at %d", again.GetEvalId(), again.GetIndex(), reg.GetEvalId(), reg.GetIndex())
	}

	waitRecorded(t, leader, 3)
	peers, err := droverv1.NewOperatorServiceClient(fs[1].Conn).RaftListPeers(ctx, &droverv1.RaftListPeersRequest{})
	if err != nil {
		t.Fatalf("list peers: %v", err)
	}
	if len(peers.GetPeers()) != 3 {
		t.Fatalf("peers = %v, want 3", peers.GetPeers())
	}
	for _, p := range peers.GetPeers() {
		if !p.GetVoter() || p.GetRpcAddr() == "" || p.GetLeader() != (p.GetId() == leader.ID()) {
			t.Errorf("peer %v: want a voter with an rpc address, leader only for %s", p, leader.ID())
		}
	}
}

// TestOperatorRefusals checks the operator calls that must change nothing.
func TestOperatorRefusals(t *testing.T) {
	servers := testserver.StartCluster(t, 3)
	leader := waitLeader(t, servers)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	op := droverv1.NewOperatorServiceClient(followers(servers, leader)[0].Conn)
	for _, tc := range []struct {
		name string
		req  *droverv1.RaftRemovePeerRequest
		code codes.Code
	}{
		{"leader itself", &droverv1.RaftRemovePeerRequest{Id: leader.ID()}, codes.FailedPrecondition},
		{"unknown id", &droverv1.RaftRemovePeerRequest{Id: "nobody"}, codes.NotFound},
		{"unknown address", &droverv1.RaftRemovePeerRequest{Address: "127.0.0.1:1"}, codes.NotFound},
		{"neither", &droverv1.RaftRemovePeerRequest{}, codes.InvalidArgument},
		{"both", &droverv1.RaftRemovePeerRequest{Id: "s1", Address: "127.0.0.1:1"}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := op.RaftRemovePeer(ctx, tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("remove peer %v: %v, want %s", tc.req, err, tc.code)
			}
		})
	}
	peers, err := op.RaftListPeers(ctx, &droverv1.RaftListPeersRequest{})
	if err != nil || len(peers.GetPeers()) != 3 {
		t.Fatalf("peers after refusals: %v, %v; want 3", peers.GetPeers(), err)
	}
}

// TestJoinAddsVoter starts a fourth server with only -join; it is added as
// a non-voter and promoted once stable.
func TestJoinAddsVoter(t *testing.T) {
	stabilize := func(c *server.Config) {
		c.Autopilot.ServerStabilizationTime = 500 * time.Millisecond
		c.Autopilot.UpdateInterval = 200 * time.Millisecond
		c.Autopilot.ReconcileInterval = 200 * time.Millisecond
	}
	servers := testserver.StartCluster(t, 3, stabilize)
	leader := waitLeader(t, servers)
	fourth := testserver.Start(t, stabilize, func(c *server.Config) {
		c.Bootstrap = false
		c.ServerID = "s4"
		c.Join = []string{servers[0].RPCAddr()}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	op := droverv1.NewOperatorServiceClient(fourth.Conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		peers, err := op.RaftListPeers(ctx, &droverv1.RaftListPeersRequest{})
		voters := 0
		for _, p := range peers.GetPeers() {
			if p.GetVoter() {
				voters++
			}
		}
		if err == nil && voters == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peers %v, %v: want 4 voters", peers.GetPeers(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	members, err := droverv1.NewOperatorServiceClient(leader.Conn).ServerMembers(ctx, &droverv1.ServerMembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(members.GetServers()) != 4 || members.GetLeaderId() != leader.ID() {
		t.Fatalf("members %v: want 4 servers led by %s", members, leader.ID())
	}
}
