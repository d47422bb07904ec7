package simagent_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// fakeNodes is a NodeService that accepts every registration and
// heartbeat, with a TTL of one second, except that it forgets each node
// once: the first heartbeat after a node's first registration is NotFound,
// as if the servers had collected the node.
type fakeNodes struct {
	droverv1.UnimplementedNodeServiceServer

	mu            sync.Mutex
	registrations map[string]int
	beats         map[string]int
}

func (f *fakeNodes) Register(_ context.Context, req *droverv1.RegisterNodeRequest) (*droverv1.RegisterNodeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registrations[req.GetNode().GetId()]++
	return &droverv1.RegisterNodeResponse{HeartbeatTtl: durationpb.New(time.Second), Status: droverv1.NodeStatus_NODE_STATUS_INITIALIZING}, nil
}

func (f *fakeNodes) UpdateStatus(_ context.Context, req *droverv1.UpdateNodeStatusRequest) (*droverv1.UpdateNodeStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := req.GetNodeId()
	if f.registrations[id] == 1 && f.beats[id] == 0 {
		f.beats[id] = -1 // forgotten once
		return nil, status.Errorf(codes.NotFound, "node %s: not found", id)
	}
	f.beats[id] = max(f.beats[id], 0) + 1
	return &droverv1.UpdateNodeStatusResponse{HeartbeatTtl: durationpb.New(time.Second), Status: droverv1.NodeStatus_NODE_STATUS_READY}, nil
}

// counts returns, per node, registrations and accepted heartbeats.
func (f *fakeNodes) counts(id string) (registrations, beats int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.registrations[id], max(f.beats[id], 0)
}

// startFake serves a fakeNodes on a loopback port until the test ends.
func startFake(t *testing.T) (*fakeNodes, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeNodes{registrations: make(map[string]int), beats: make(map[string]int)}
	srv := grpc.NewServer()
	droverv1.RegisterNodeServiceServer(srv, fake)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return fake, l.Addr().String()
}

// TestFleetRegistersAgainAndMovesOn starts agents on a dead address and a
// fake server that forgets each node once: every agent must move on to the
// live server, register again when its node is not found, and keep
// heartbeating.
func TestFleetRegistersAgainAndMovesOn(t *testing.T) {
	fake, addr := startFake(t)
	// Nothing listens on port 1 of loopback, and no test could bind it
	// by chance the way it could take a port that was free a moment ago.
	dead := "127.0.0.1:1"
	f := startFleet(t, []string{dead, addr}, 10, func(c *simagent.Config) {
		c.HeartbeatOnly = true
		c.RetryMin, c.RetryMax = 10*time.Millisecond, 100*time.Millisecond
	})
	waitFor(t, "every node registered twice and heartbeating", func() (bool, string) {
		for _, a := range f.Agents() {
			regs, beats := fake.counts(a.Node().ID)
			if regs != 2 || beats < 2 || a.Status() != droverv1.NodeStatus_NODE_STATUS_READY {
				return false, fmt.Sprintf("node %s: %d registrations, %d heartbeats, status %s", a.Node().ID, regs, beats, a.Status())
			}
		}
		return true, ""
	})
	st := f.Stats()
	if st.Failovers < 5 || st.Registrations != 20 || st.HeartbeatsFailed < 10 {
		t.Errorf("stats %+v: want the 5 agents that started on the dead server to fail over, 20 registrations, 10 heartbeats not found", st)
	}
	if got := f.Servers(); len(got) != 2 {
		t.Errorf("servers %v, want the two configured", got)
	}
}
