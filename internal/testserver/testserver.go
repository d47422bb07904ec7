// Package testserver starts real drover servers inside a test process: raft
// and bbolt on a temporary data dir, gRPC on a loopback port. Only tests
// import it.
package testserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server"
)

// startTimeout bounds how long a server may take to elect itself and
// report healthy.
const startTimeout = 30 * time.Second

// Server is a running in-process server and a client connection to it.
type Server struct {
	*server.Server
	Config server.Config
	Conn   *grpc.ClientConn
}

// Start runs a single bootstrapped server on a fresh data dir. Options
// adjust the configuration before start. The server is shut down and its
// data dir removed when the test ends.
func Start(t testing.TB, opts ...func(*server.Config)) *Server {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Bootstrap = true
	cfg.RPCAddr = "127.0.0.1:0"
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, o := range opts {
		o(&cfg)
	}
	return start(t, cfg)
}

func start(t testing.TB, cfg server.Config) *Server {
	t.Helper()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	s := &Server{Server: srv, Config: cfg}
	t.Cleanup(func() { s.stop(t) })
	s.Conn = Dial(t, srv.RPCAddr())
	WaitServing(t, s.Conn)
	s.waitRecorded(t)
	if cfg.Version == "" {
		s.waitClusterMetadata(t)
	}
	return s
}

// waitRecorded waits until the server's state records the server itself.
// A server announces itself with a raft write after it starts; tests that
// compare indexes must not see that write land in the middle.
func (s *Server) waitRecorded(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for s.State().Snapshot().ServerByID(s.ID()) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("server %s did not record itself within %s", s.ID(), startTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Server) stop(t testing.TB) {
	if s.Conn != nil {
		_ = s.Conn.Close()
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("shut down server: %v", err)
	}
}

// Restart shuts the server down and starts it again on the same data dir
// and addresses, as a restarted process would be; the unchanged gRPC
// address means its announce loop has nothing to write.
func (s *Server) Restart(t testing.TB) *Server {
	t.Helper()
	cfg := s.sameAddresses()
	s.stop(t)
	return start(t, cfg)
}

// sameAddresses is the server's configuration for starting it again on
// the addresses it has now. The listener it may have been given closes
// with it, so the new one listens on the address again.
func (s *Server) sameAddresses() server.Config {
	cfg := s.Config
	cfg.RaftAddr = s.RaftAddr()
	cfg.RPCAddr = s.RPCAddr()
	cfg.RPCListener = nil
	return cfg
}

// Wipe shuts the server down, deletes its data dir and starts it again
// with the same id and addresses, as a server whose disk was replaced
// would come back. It must catch up from the other servers.
func (s *Server) Wipe(t testing.TB) *Server {
	t.Helper()
	cfg := s.sameAddresses()
	cfg.ServerID = s.ID()
	s.stop(t)
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		t.Fatalf("wipe data dir: %v", err)
	}
	return start(t, cfg)
}

// Dial connects to a server with drover's codec. The connection is closed
// when the test ends, if the test has not closed it before.
func Dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rpc.Codec{})))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// WaitServing blocks until the server reports the node service SERVING
// through grpc.health.v1 Watch.
func WaitServing(t testing.TB, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx,
		&healthpb.HealthCheckRequest{Service: droverv1.NodeService_ServiceDesc.ServiceName}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("watch health: %v", err)
	}
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("server did not become healthy within %s: %v", startTimeout, err)
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
	}
}

// StartCluster runs n in-process servers that form a cluster through
// -bootstrap-expect and -join, as separate processes would, and waits until
// every one reports healthy. Options adjust each server's configuration.
func StartCluster(t testing.TB, n int, opts ...func(*server.Config)) []*Server {
	t.Helper()
	// Every server's listener is open before any server starts, so that
	// no other socket can take a port between choosing and serving it.
	listeners := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen for server s%d: %v", i+1, err)
		}
		t.Cleanup(func() { _ = l.Close() }) // if its server never starts
		listeners[i], addrs[i] = l, l.Addr().String()
	}
	servers := make([]*Server, n)
	for i := range servers {
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.ServerID = fmt.Sprintf("s%d", i+1)
		cfg.RPCAddr = addrs[i]
		cfg.RPCListener = listeners[i]
		cfg.RaftAddr = "127.0.0.1:0"
		cfg.BootstrapExpect = n
		cfg.Join = addrs
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		for _, o := range opts {
			o(&cfg)
		}
		srv, err := server.New(cfg)
		if err != nil {
			t.Fatalf("start server %s: %v", cfg.ServerID, err)
		}
		s := &Server{Server: srv, Config: cfg}
		t.Cleanup(func() { s.stop(t) })
		s.Conn = Dial(t, srv.RPCAddr())
		servers[i] = s
	}
	for _, s := range servers {
		WaitServing(t, s.Conn)
	}
	current := true
	for _, s := range servers {
		s.waitRecorded(t)
		current = current && s.Config.Version == ""
	}
	if current {
		for _, s := range servers {
			s.waitClusterMetadata(t)
		}
	}
	return servers
}

// waitClusterMetadata waits until the server's state holds the cluster
// metadata, which the leader writes once every server runs a release that
// knows it: a raft write that tests comparing indexes must not see land in
// the middle. Servers started with an older Version are not waited for.
func (s *Server) waitClusterMetadata(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// Blocks until the cluster metadata table has been written (at an
	// index above 1: the first entry is the raft configuration).
	index, err := s.State().BlockingQuery(ctx, 1, func(snap *state.Snapshot) (uint64, error) {
		return snap.TableIndex(state.TableClusterMeta), nil
	})
	if err != nil || index <= 1 {
		t.Fatalf("server %s: no cluster metadata within %s (%v)", s.ID(), startTimeout, err)
	}
}
