package server_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	"github.com/droverhq/drover/internal/version"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server"
)

// waitClusterID waits until s's state holds the cluster metadata and
// returns the cluster id.
func waitClusterID(ctx context.Context, t *testing.T, s *testserver.Server) string {
	t.Helper()
	var id string
	if _, err := s.State().BlockingQuery(ctx, 1, func(snap *state.Snapshot) (uint64, error) {
		id = snap.ClusterMetadata().GetClusterId()
		return snap.TableIndex(state.TableClusterMeta), nil
	}); err != nil || id == "" {
		t.Fatalf("%s: no cluster metadata (%v)", s.ID(), err)
	}
	return id
}

// TestGatedEntryWaitsForEveryServer runs a cluster with one server of the
// previous release: the leader refuses to write the new entry type, naming
// that server, and writes the cluster metadata once it is upgraded.
func TestGatedEntryWaitsForEveryServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	servers := testserver.StartCluster(t, 3, func(c *server.Config) {
		if c.ServerID == "s3" {
			c.Version = "0.1.0"
		}
	})
	leader := waitLeader(t, servers)
	waitRecorded(t, leader, 3)

	entry := &droverv1.ClusterMetadataEntry{Metadata: &droverv1.ClusterMetadata{ClusterId: "5d0c3b9e-2b8f-4a51-9a55-0f0e1d2c3b4a"}}
	_, _, err := leader.Apply(ctx, droverv1.MessageTypeClusterMetadata, entry)
	if !errors.Is(err, rpc.ErrFailedPrecondition) || !strings.Contains(err.Error(), "s3 (0.1.0)") || strings.Contains(err.Error(), "s1") {
		t.Fatalf("Apply of cluster metadata with s3 on 0.1.0: %v; want FAILED_PRECONDITION naming s3 and its version only", err)
	}
	// First-release types are written as ever.
	if _, err := droverv1.NewNodeServiceClient(leader.Conn).Register(ctx, &droverv1.RegisterNodeRequest{Node: mock.Node()}); err != nil {
		t.Fatalf("register a node: %v", err)
	}
	for _, s := range servers {
		if id := s.Info().GetClusterId(); id != "" {
			t.Errorf("%s holds cluster id %s while s3 runs 0.1.0", s.ID(), id)
		}
	}

	// Upgrade s3: the leader notices its new record and writes the
	// metadata, which every server then holds.
	s3 := servers[2]
	s3.Config.Version = ""
	servers[2] = s3.Restart(t)
	want := waitClusterID(ctx, t, waitLeader(t, servers))
	for _, s := range servers {
		if got := waitClusterID(ctx, t, s); got != want {
			t.Errorf("%s: cluster id %s, want %s", s.ID(), got, want)
		}
		info, err := droverv1.NewClusterServiceClient(s.Conn).Info(ctx, &droverv1.ServerInfoRequest{})
		if err != nil || info.GetClusterId() != want {
			t.Errorf("%s: Info cluster id %q (%v), want %s", s.ID(), info.GetClusterId(), err, want)
		}
	}
	members, err := droverv1.NewOperatorServiceClient(servers[0].Conn).ServerMembers(ctx, &droverv1.ServerMembersRequest{})
	if err != nil || members.GetClusterId() != want {
		t.Errorf("ServerMembers cluster id %q (%v), want %s", members.GetClusterId(), err, want)
	}
}

// TestHaltOnUnknownEntry proposes, as a newer release would write them, an
// entry of an unknown ignorable type, which every server skips, then one of
// an unknown type below 128: every server stops applying at its index,
// keeps its state, says why and refuses reads and writes.
func TestHaltOnUnknownEntry(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	servers := testserver.StartCluster(t, 3)
	leader := waitLeader(t, servers)
	n := mock.Node()
	if _, err := droverv1.NewNodeServiceClient(leader.Conn).Register(ctx, &droverv1.RegisterNodeRequest{Node: n}); err != nil {
		t.Fatal(err)
	}

	skipIndex, resp, err := leader.ApplyRaw([]byte{byte(droverv1.IgnoreUnknownTypeFlag) | 100, 1, 2, 3})
	if err != nil || resp != nil {
		t.Fatalf("ignorable entry: response %v, error %v", resp, err)
	}
	digests := map[string]map[string]string{}
	for _, s := range servers {
		snap, err := s.State().SnapshotMinIndex(ctx, skipIndex)
		if err != nil {
			t.Fatalf("%s did not get past the ignorable entry: %v", s.ID(), err)
		}
		if snap.NodeByID(n.GetId()) == nil || s.HaltReason() != nil {
			t.Fatalf("%s: node missing or halted (%v) after the ignorable entry", s.ID(), s.HaltReason())
		}
		if digests[s.ID()], err = snap.Digest(); err != nil {
			t.Fatal(err)
		}
	}

	haltIndex, resp, err := leader.ApplyRaw([]byte{100, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := resp.(*fsm.Halt); !ok || h.Index != haltIndex {
		t.Fatalf("leader's response to the unknown entry: %v, want its halt at index %d", resp, haltIndex)
	}
	for _, s := range servers {
		select {
		case <-s.Halted():
		case <-ctx.Done():
			t.Fatalf("%s did not halt", s.ID())
		}
		reason := s.HaltReason()
		for _, part := range []string{"index " + strconv.FormatUint(haltIndex, 10), "MessageType(100)", "release " + version.Version, "upgrade this server"} {
			if !strings.Contains(reason.Error(), part) {
				t.Errorf("%s: halt reason %q lacks %q", s.ID(), reason, part)
			}
		}
	}

	// Nothing is applied after the halt either.
	late := mock.Node()
	data, err := fsm.Encode(droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{late}})
	if err != nil {
		t.Fatal(err)
	}
	if _, resp, err := leader.ApplyRaw(data); err != nil || !errors.As(resp.(error), new(*fsm.Halt)) {
		t.Errorf("entry after the halt: response %v, error %v; want the halt", resp, err)
	}

	for _, s := range servers {
		snap := s.State().Snapshot()
		if got := snap.Index(); got != haltIndex-1 {
			t.Errorf("%s: applied index %d, want %d (the entry before the halt)", s.ID(), got, haltIndex-1)
		}
		if got, err := snap.Digest(); err != nil || !maps.Equal(got, digests[s.ID()]) {
			t.Errorf("%s: state changed after the halt (%v)", s.ID(), err)
		}
		if snap.NodeByID(late.GetId()) != nil {
			t.Errorf("%s applied an entry after the halt", s.ID())
		}
		waitNotServing(ctx, t, s)
		_, err := droverv1.NewNodeServiceClient(s.Conn).GetAllocs(ctx, &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId()})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "upgrade this server") {
			t.Errorf("%s: read after the halt: %v; want FAILED_PRECONDITION with the reason", s.ID(), err)
		}
		_, err = droverv1.NewJobServiceClient(s.Conn).Register(ctx, &droverv1.RegisterJobRequest{Job: mock.Job(1)})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "upgrade this server") {
			t.Errorf("%s: write after the halt: %v; want FAILED_PRECONDITION with the reason", s.ID(), err)
		}
		if _, _, err := s.Apply(ctx, droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{mock.Node()}}); !errors.Is(err, rpc.ErrFailedPrecondition) {
			t.Errorf("%s: Apply after the halt: %v; want FAILED_PRECONDITION", s.ID(), err)
		}
		if err := s.TakeSnapshot(); err == nil || !strings.Contains(err.Error(), "refusing to snapshot") {
			t.Errorf("%s: snapshot after the halt: %v; want a refusal", s.ID(), err)
		}
		// Operators can still look: the cluster service answers.
		if info, err := droverv1.NewClusterServiceClient(s.Conn).Info(ctx, &droverv1.ServerInfoRequest{}); err != nil || info.GetAppliedIndex() != haltIndex-1 {
			t.Errorf("%s: Info after the halt: applied %d, %v", s.ID(), info.GetAppliedIndex(), err)
		}
	}

	// A halted server shuts down without waiting on its FSM.
	for _, s := range servers {
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: shutdown: %v", s.ID(), err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: shutdown of a halted server hangs", s.ID())
		}
	}
}

// waitNotServing waits until s reports the node service NOT_SERVING.
func waitNotServing(ctx context.Context, t *testing.T, s *testserver.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream, which would hold up the server's shutdown
	watch, err := healthpb.NewHealthClient(s.Conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: droverv1.NodeService_ServiceDesc.ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("%s did not report NOT_SERVING: %v", s.ID(), err)
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			return
		}
	}
}
