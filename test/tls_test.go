package test_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestTLSCluster runs a 3-server cluster with mutual TLS. It forms, and a
// job registered on a follower is placed by the followers' workers through
// the leader. A caller with a client certificate is refused the scheduler
// service and the leader's read index on a follower and on the leader, and
// the waiting evaluation stays where it was. A follower answers a consistent
// read itself, with the read index its server certificate gets from the
// leader. Callers without a certificate cannot connect, and a client
// certificate cannot speak raft.
func TestTLSCluster(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.TLS(), httpArgs())
	ctx := within(t, testContext(t), 2*time.Minute)
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	nodes := readyNodes(ctx, t, follower.Conn(), 10)

	// The leader's workers are paused: the followers' place the job, over
	// TLS with their server certificates, through the leader's broker and
	// plan queue.
	setWorkers(ctx, t, leader, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(true)})
	placed := mock.Job(10)
	if _, err := registerJob(ctx, follower.Conn(), placed, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	waitPlaced(ctx, t, follower, placed.GetId(), 10)

	// With every worker paused, an evaluation waits in the broker.
	for _, s := range c.Others(leader) {
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(true)})
	}
	waiting := mock.Job(5)
	if _, err := registerJob(ctx, follower.Conn(), waiting, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	var before *droverv1.SchedulerStatsResponse
	poll(ctx, t, "the evaluation ready in the broker", func() (bool, string) {
		before = schedulerStats(ctx, t, leader)
		return before.GetReady() > 0, "none ready"
	})
	for _, s := range []*cluster.Server{follower, leader} {
		err := dequeue(ctx, s.Conn())
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("Dequeue with a client certificate on %s: %v, want PermissionDenied", s, err)
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err = droverv1.NewClusterServiceClient(s.Conn()).ReadIndex(cctx, &droverv1.ReadIndexRequest{})
		cancel()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("ReadIndex with a client certificate on %s: %v, want PermissionDenied", s, err)
		}
	}
	if after := schedulerStats(ctx, t, leader); after.GetReady() != before.GetReady() || after.GetUnacked() != before.GetUnacked() {
		t.Errorf("refused dequeues changed the broker: ready %d unacked %d, before ready %d unacked %d",
			after.GetReady(), after.GetUnacked(), before.GetReady(), before.GetUnacked())
	}
	if allocs, err := jobAllocs(ctx, leader.Conn(), waiting.GetId()); err != nil || len(allocs) != 0 {
		t.Errorf("waiting job: %d allocations (%v), want none", len(allocs), err)
	}
	for _, s := range c.Servers() {
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: ptr(false)})
	}
	waitPlaced(ctx, t, follower, waiting.GetId(), 5)
	checkInvariants(ctx, t, leader, nodes, placed.GetId(), waiting.GetId())

	t.Run("a follower answers consistent reads itself", func(t *testing.T) {
		before := consistentReadCounts(ctx, t, follower)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := droverv1.NewNodeServiceClient(follower.Conn()).Get(cctx, &droverv1.GetNodeRequest{NodeId: nodes[0].GetId()})
		cancel()
		if err != nil {
			t.Fatalf("consistent read on %s: %v", follower, err)
		}
		after := consistentReadCounts(ctx, t, follower)
		if got := after["follower"] - before["follower"]; got != 1 {
			t.Errorf("%s answered %v consistent reads itself (forwarded %v), want 1: its read index from the leader failed",
				follower, got, after["forwarded"]-before["forwarded"])
		}
	})

	certs := c.Certs()
	t.Run("callers without a certificate cannot connect", func(t *testing.T) {
		caOnly, err := tlsconfig.Config{CAFile: certs.CAFile}.ClientCredentials()
		if err != nil {
			t.Fatal(err)
		}
		for name, conn := range map[string]*grpc.ClientConn{
			"TLS without a certificate": follower.Dial(grpc.WithTransportCredentials(caOnly)),
			"plaintext":                 follower.Dial(grpc.WithTransportCredentials(insecure.NewCredentials())),
		} {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			_, err := droverv1.NewClusterServiceClient(conn).Info(cctx, &droverv1.ServerInfoRequest{})
			cancel()
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s: Info answered %v, want Unavailable", name, err)
			}
		}
	})
	t.Run("a client certificate cannot speak raft", func(t *testing.T) {
		for _, s := range []*cluster.Server{leader, follower} {
			if err := raftProbe(s.RaftAddr(), certs.Client()); err == nil {
				t.Errorf("%s kept a raft connection with a client certificate", s)
			} else {
				t.Logf("%s refused a client certificate on raft: %v", s, err)
			}
			if err := raftProbe(s.RaftAddr(), certs.Server()); err != nil {
				t.Errorf("%s refused a raft connection with a server certificate: %v", s, err)
			}
		}
	})
}

// dequeue asks conn's server for an evaluation of the scheduler service.
func dequeue(ctx context.Context, conn grpc.ClientConnInterface) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := droverv1.NewSchedulerServiceClient(conn).Dequeue(ctx, &droverv1.DequeueRequest{
		Schedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE}, Timeout: int64(100 * time.Millisecond),
	})
	return err
}

// schedulerStats reads the leader's broker statistics.
func schedulerStats(ctx context.Context, t *testing.T, leader *cluster.Server) *droverv1.SchedulerStatsResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := droverv1.NewOperatorServiceClient(leader.Conn()).SchedulerStats(ctx, &droverv1.SchedulerStatsRequest{})
	if err != nil {
		t.Fatalf("scheduler stats from %s: %v", leader, err)
	}
	return resp
}

// raftProbe connects to a raft port with TLS as the holder of identity and
// reports whether the server kept the connection: a refused caller's
// handshake or first read fails at once, an accepted one's read times out
// waiting for raft to speak.
func raftProbe(addr string, identity tlsconfig.Config) error {
	cfg, err := identity.ClientTLS()
	if err != nil {
		return err
	}
	return testcerts.Probe(addr, cfg, 500*time.Millisecond)
}
