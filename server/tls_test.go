package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/testserver"
	"github.com/droverhq/drover/internal/tlsconfig"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server"
)

// startTLS runs a bootstrapped server with identity tc until the test ends.
func startTLS(t *testing.T, tc tlsconfig.Config) (*server.Server, error) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Bootstrap = true
	cfg.RPCAddr, cfg.RaftAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Scheduler.NumWorkers = 1
	cfg.TLS = tc
	srv, err := server.New(cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Errorf("shut down: %v", err)
		}
	})
	return srv, nil
}

// dialTLS connects to addr as the holder of tc.
func dialTLS(t *testing.T, addr string, tc tlsconfig.Config) *grpc.ClientConn {
	t.Helper()
	creds, err := tc.ClientCredentials()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rpc.Codec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestTLSServerSchedules: with TLS, a client certificate may register nodes
// and jobs but not call the scheduler service, and the server's own workers,
// which dial it with the server certificate, still place the job.
func TestTLSServerSchedules(t *testing.T) {
	certs := testcerts.New(t)
	srv, err := startTLS(t, certs.Server())
	if err != nil {
		t.Fatal(err)
	}
	conn := dialTLS(t, srv.RPCAddr(), certs.Client())
	testserver.WaitServing(t, conn)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	_, err = droverv1.NewSchedulerServiceClient(conn).Dequeue(ctx, &droverv1.DequeueRequest{Schedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "may only be called by servers") {
		t.Fatalf("dequeue with a client certificate: %v, want PERMISSION_DENIED", err)
	}

	nodes := droverv1.NewNodeServiceClient(conn)
	for range 2 {
		n := mock.Node()
		if _, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
			t.Fatal(err)
		}
		if _, err := nodes.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY}); err != nil {
			t.Fatal(err)
		}
	}
	job := mock.Job(2)
	if _, err := droverv1.NewJobServiceClient(conn).Register(ctx, &droverv1.RegisterJobRequest{Job: job}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := droverv1.NewJobServiceClient(conn).Allocations(ctx, &droverv1.ListJobAllocationsRequest{JobId: job.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetAllocations()) == 2 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job placed %d of 2 allocations", len(resp.GetAllocations()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestTLSServerNeedsServerCertificate: a server started with a client
// certificate would be refused by every other server; it does not start.
func TestTLSServerNeedsServerCertificate(t *testing.T) {
	certs := testcerts.New(t)
	tc := tlsconfig.Config{CAFile: certs.CAFile, CertFile: certs.ClientCertFile, KeyFile: certs.ClientKeyFile}
	if _, err := startTLS(t, tc); err == nil || !strings.Contains(err.Error(), certs.ClientCertFile) {
		t.Fatalf("start with a client certificate: %v, want an error naming %s", err, certs.ClientCertFile)
	}
}
