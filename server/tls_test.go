package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	return startTLSLogging(t, tc, io.Discard)
}

// startTLSLogging is startTLS with the server's log written to w.
func startTLSLogging(t *testing.T, tc tlsconfig.Config, w io.Writer) (*server.Server, error) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Bootstrap = true
	cfg.RPCAddr, cfg.RaftAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(w, nil))
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

// TestTLSServerNeedsCertificateOfTheCA: a server whose certificate its CA
// did not sign would be refused by every other server; it does not start.
func TestTLSServerNeedsCertificateOfTheCA(t *testing.T) {
	certs, foreign := testcerts.New(t), testcerts.New(t)
	tc := tlsconfig.Config{CAFile: certs.CAFile, CertFile: foreign.ServerCertFile, KeyFile: foreign.ServerKeyFile}
	if _, err := startTLS(t, tc); err == nil || !strings.Contains(err.Error(), "does not verify against the CA") {
		t.Fatalf("start with a certificate of another CA: %v, want an error saying it does not verify", err)
	}
}

// lockedBuffer is a log the server writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// presented dials addr with TLS as the holder of tc and returns the serial
// of the certificate the server presents on a new connection.
func presented(t *testing.T, addr string, tc tlsconfig.Config) string {
	t.Helper()
	cfg, err := tc.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	cfg.NextProtos = []string{"h2"} // what gRPC asks for; the raft listener ignores it
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS connection to %s: %v", addr, err)
	}
	defer conn.Close()
	return fmt.Sprintf("%X", conn.ConnectionState().PeerCertificates[0].SerialNumber)
}

// TestTLSReload rotates a running server's certificate with ReloadTLS: new
// gRPC and raft connections get the new one, a connection opened before
// keeps working, and files that fail the checks are refused and logged
// while the server keeps the certificate it had.
func TestTLSReload(t *testing.T) {
	certs := testcerts.New(t)
	dir := t.TempDir()
	files := tlsconfig.Config{CAFile: certs.CAFile, CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem")}
	first, err := certs.WriteServer(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	srv, err := startTLSLogging(t, files, &log)
	if err != nil {
		t.Fatal(err)
	}
	before := dialTLS(t, srv.RPCAddr(), certs.Client())
	testserver.WaitServing(t, before)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	info := func(conn *grpc.ClientConn) error {
		_, err := droverv1.NewClusterServiceClient(conn).Info(ctx, &droverv1.ServerInfoRequest{})
		return err
	}
	for _, addr := range []string{srv.RPCAddr(), srv.RaftAddr()} {
		if got := presented(t, addr, certs.Server()); got != fmt.Sprintf("%X", first.SerialNumber) {
			t.Fatalf("%s presents serial %s before the reload, want %X", addr, got, first.SerialNumber)
		}
	}

	second, err := certs.WriteServer(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ReloadTLS(); err != nil {
		t.Fatalf("ReloadTLS: %v", err)
	}
	want := fmt.Sprintf("%X", second.SerialNumber)
	for _, addr := range []string{srv.RPCAddr(), srv.RaftAddr()} {
		if got := presented(t, addr, certs.Server()); got != want {
			t.Errorf("%s presents serial %s after the reload, want %s", addr, got, want)
		}
	}
	if err := info(before); err != nil {
		t.Errorf("the connection opened before the reload: %v", err)
	}
	if err := info(dialTLS(t, srv.RPCAddr(), certs.Client())); err != nil {
		t.Errorf("a connection opened after the reload: %v", err)
	}
	if out := log.String(); !strings.Contains(out, "TLS certificates reloaded") || !strings.Contains(out, fmt.Sprintf("%X→%s", first.SerialNumber, want)) {
		t.Errorf("the log does not say what changed:\n%s", out)
	}

	if err := os.WriteFile(files.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = srv.ReloadTLS()
	if err == nil || !strings.Contains(err.Error(), files.KeyFile) {
		t.Fatalf("ReloadTLS with a damaged key file: %v, want an error naming %s", err, files.KeyFile)
	}
	if got := presented(t, srv.RPCAddr(), certs.Server()); got != want {
		t.Errorf("after refused files the server presents serial %s, want %s (the one it had)", got, want)
	}
	if err := info(dialTLS(t, srv.RPCAddr(), certs.Client())); err != nil {
		t.Errorf("a connection opened after refused files: %v", err)
	}
	if out := log.String(); !strings.Contains(out, "TLS files refused") || !strings.Contains(out, files.KeyFile) {
		t.Errorf("the log does not say the files were refused:\n%s", out)
	}
}

// TestTLSReloadWithoutTLS: a plaintext server has nothing to reload.
func TestTLSReloadWithoutTLS(t *testing.T) {
	srv, err := startTLS(t, tlsconfig.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ReloadTLS(); err != nil {
		t.Errorf("ReloadTLS without TLS: %v", err)
	}
}
