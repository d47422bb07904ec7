package rpc

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestServerOnlyMethods(t *testing.T) {
	tests := []struct {
		method string
		want   bool
	}{
		{droverv1.SchedulerService_Dequeue_FullMethodName, true},
		{droverv1.SchedulerService_SubmitPlan_FullMethodName, true},
		{droverv1.SchedulerService_ReblockEval_FullMethodName, true},
		{droverv1.ClusterService_Join_FullMethodName, true},
		{droverv1.ClusterService_ReadIndex_FullMethodName, true},
		{droverv1.ClusterService_Info_FullMethodName, false},
		{droverv1.OperatorService_SchedulerWorkers_FullMethodName, false},
		{droverv1.OperatorService_RaftRemovePeer_FullMethodName, false},
		{droverv1.NodeService_Register_FullMethodName, false},
		{droverv1.JobService_Register_FullMethodName, false},
		{"/" + droverv1.SchedulerService_ServiceDesc.ServiceName + "x/Dequeue", false},
	}
	for _, tt := range tests {
		if got := serverOnly(tt.method); got != tt.want {
			t.Errorf("serverOnly(%s) = %v, want %v", tt.method, got, tt.want)
		}
	}
	for _, m := range droverv1.SchedulerService_ServiceDesc.Methods {
		if name := "/" + droverv1.SchedulerService_ServiceDesc.ServiceName + "/" + m.MethodName; !serverOnly(name) {
			t.Errorf("%s is open to clients", name)
		}
	}
}

// TestServerOnlyNeedsServerCertificate runs a leader and a follower with
// mutual TLS. Callers with a client certificate are refused server-only
// calls on both, before the follower forwards anything; callers with a
// server certificate get through, from the follower by way of the leader.
func TestServerOnlyNeedsServerCertificate(t *testing.T) {
	certs := testcerts.New(t)
	leader := startAuthServer(t, certs, Leader{ID: "leader", Local: true, Ready: true})
	follower := startAuthServer(t, certs, Leader{ID: "leader", RPCAddr: leader.addr})
	member := &droverv1.ServerMember{Id: "s4", RpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", Version: "0.1.0"}
	dequeue := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := droverv1.NewSchedulerServiceClient(conn).Dequeue(ctx, &droverv1.DequeueRequest{
			Schedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE}, Timeout: int64(time.Millisecond),
		})
		return err
	}
	join := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := droverv1.NewClusterServiceClient(conn).Join(ctx, &droverv1.JoinRequest{Server: member})
		return err
	}
	info := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := droverv1.NewClusterServiceClient(conn).Info(ctx, &droverv1.ServerInfoRequest{})
		return err
	}
	tests := []struct {
		name       string
		caller     tlsconfig.Config
		to         *authServer
		call       func(context.Context, *grpc.ClientConn) error
		want       codes.Code
		wantLeader int64 // calls reaching the leader's scheduling or cluster
	}{
		{"client dequeues on follower", certs.Client(), follower, dequeue, codes.PermissionDenied, 0},
		{"client dequeues on leader", certs.Client(), leader, dequeue, codes.PermissionDenied, 0},
		{"client joins through follower", certs.Client(), follower, join, codes.PermissionDenied, 0},
		{"client asks for info", certs.Client(), follower, info, codes.OK, 0},
		{"server dequeues on follower", certs.Server(), follower, dequeue, codes.OK, 1},
		{"server dequeues on leader", certs.Server(), leader, dequeue, codes.OK, 1},
		{"server joins through follower", certs.Server(), follower, join, codes.OK, 1},
		{"no certificate", tlsconfig.Config{CAFile: certs.CAFile}, follower, info, codes.Unavailable, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds, err := tt.caller.ClientCredentials()
			if err != nil {
				t.Fatal(err)
			}
			before := leader.calls.Load()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err = tt.call(ctx, dialAuth(t, tt.to.addr, creds))
			if got := status.Code(err); got != tt.want {
				t.Fatalf("code %s (%v), want %s", got, err, tt.want)
			}
			if got := leader.calls.Load() - before; got != tt.wantLeader {
				t.Errorf("%d calls reached the leader, want %d", got, tt.wantLeader)
			}
			if n := follower.calls.Load(); n != 0 {
				t.Errorf("the follower answered %d calls itself instead of forwarding", n)
			}
		})
	}
}

// TestPlaintextChecksNothing: without TLS configured every caller may call
// everything, as on a development machine.
func TestPlaintextChecksNothing(t *testing.T) {
	srv := newAuthServer(t, Leader{ID: "leader", Local: true, Ready: true}, Config{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := droverv1.NewSchedulerServiceClient(dialAuth(t, srv.addr, insecure.NewCredentials())).Dequeue(ctx,
		&droverv1.DequeueRequest{Schedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_BATCH}})
	if err != nil || srv.calls.Load() != 1 {
		t.Fatalf("dequeue over plaintext: %v, %d calls answered", err, srv.calls.Load())
	}
}

// authServer is an rpc.Server on loopback with fakes behind it that count
// the calls they answer.
type authServer struct {
	addr  string
	calls atomic.Int64
}

// startAuthServer serves with mutual TLS, as a server configured with
// certs' server certificate would.
func startAuthServer(t *testing.T, certs *testcerts.Set, leader Leader) *authServer {
	t.Helper()
	listen, err := certs.Server().ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	dial, err := certs.Server().ClientCredentials()
	if err != nil {
		t.Fatal(err)
	}
	return newAuthServer(t, leader, Config{
		Logger:                slog.New(slog.DiscardHandler),
		Credentials:           listen,
		PeerCredentials:       dial,
		RequireServerIdentity: tlsconfig.RequireServerPeer,
	})
}

func newAuthServer(t *testing.T, leader Leader, cfg Config) *authServer {
	t.Helper()
	a := &authServer{}
	cfg.Scheduling = &authScheduling{calls: &a.calls}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.addr = lis.Addr().String()
	srv := NewServer(authBackend{shutdown: make(chan struct{})}, &authCluster{leader: leader, calls: &a.calls}, cfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Stop(ctx)
		<-done
	})
	return a
}

func dialAuth(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// authBackend is a Backend for calls that never touch the state.
type authBackend struct {
	Backend
	shutdown chan struct{}
}

func (b authBackend) ShutdownCh() <-chan struct{} { return b.shutdown }

// authCluster knows a fixed leader and answers Info and Join.
type authCluster struct {
	Cluster
	leader Leader
	calls  *atomic.Int64
}

func (c *authCluster) Leader() Leader                 { return c.leader }
func (c *authCluster) LeaderChanged() <-chan struct{} { return make(chan struct{}) }
func (c *authCluster) Info() *droverv1.ServerInfoResponse {
	return &droverv1.ServerInfoResponse{LeaderId: c.leader.ID}
}

func (c *authCluster) Join(context.Context, *droverv1.ServerMember) (*droverv1.JoinResponse, error) {
	c.calls.Add(1)
	return &droverv1.JoinResponse{LeaderId: c.leader.ID}, nil
}

// authScheduling hands out no evaluations.
type authScheduling struct {
	Scheduling
	calls *atomic.Int64
}

func (s *authScheduling) Dequeue(context.Context, []droverv1.JobType, time.Duration) (*droverv1.Evaluation, string, uint64, error) {
	s.calls.Add(1)
	return nil, "", 0, nil
}
