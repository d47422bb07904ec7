package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/peterbourgon/ff/v3"

	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
	"github.com/droverhq/drover/server"
)

func TestServerFlagsFromEnvironment(t *testing.T) {
	t.Setenv("DROVER_DATA_DIR", "/srv/drover")
	t.Setenv("DROVER_RPC_ADDR", "10.0.0.5:4650")
	t.Setenv("DROVER_SNAPSHOT_INTERVAL", "30s")
	t.Setenv("DROVER_DEV", "true")
	t.Setenv("DROVER_LOG_LEVEL", "debug")
	fs, opts := serverFlags(io.Discard)
	// A flag on the command line wins over the environment.
	if err := ff.Parse(fs, []string{"-rpc-addr", "127.0.0.1:9999"}, serverEnvOptions()...); err != nil {
		t.Fatal(err)
	}
	cfg := opts.cfg
	if cfg.DataDir != "/srv/drover" || !cfg.Dev || cfg.SnapshotInterval != 30*time.Second || opts.logLevel != "debug" {
		t.Errorf("from environment: data dir %q dev %v snapshot interval %s log level %q", cfg.DataDir, cfg.Dev, cfg.SnapshotInterval, opts.logLevel)
	}
	if cfg.RPCAddr != "127.0.0.1:9999" {
		t.Errorf("rpc addr %q: the flag should win over DROVER_RPC_ADDR", cfg.RPCAddr)
	}
	if cfg.RaftAddr != "127.0.0.1:4651" {
		t.Errorf("raft addr %q, want the default", cfg.RaftAddr)
	}
}

func TestServerTLSFlags(t *testing.T) {
	t.Setenv("DROVER_TLS_CA_FILE", "/etc/drover/ca.pem")
	t.Setenv("DROVER_TLS_KEY_FILE", "/etc/drover/env-key.pem")
	fs, opts := serverFlags(io.Discard)
	if err := ff.Parse(fs, []string{"-tls-cert-file", "/etc/drover/server.pem", "-tls-key-file", "/etc/drover/server-key.pem"}, serverEnvOptions()...); err != nil {
		t.Fatal(err)
	}
	want := tlsconfig.Config{CAFile: "/etc/drover/ca.pem", CertFile: "/etc/drover/server.pem", KeyFile: "/etc/drover/server-key.pem"}
	if opts.cfg.TLS != want {
		t.Errorf("TLS %+v, want %+v", opts.cfg.TLS, want)
	}
}

func TestNewLoggerRejectsUnknownSettings(t *testing.T) {
	if _, err := newLogger(io.Discard, "loud", "text"); err == nil {
		t.Error("accepted log level loud")
	}
	if _, err := newLogger(io.Discard, "info", "xml"); err == nil {
		t.Error("accepted log format xml")
	}
}

func TestServerLimitFlags(t *testing.T) {
	t.Setenv("DROVER_RPC_MAX_OPERATOR_CALLS", "3")
	t.Setenv("DROVER_RPC_KEEPALIVE_PERMIT_WITHOUT_STREAM", "false")
	fs, opts := serverFlags(io.Discard)
	if err := ff.Parse(fs, []string{"-rpc-max-conns-per-ip", "64", "-rpc-keepalive-min-time", "20s"}, serverEnvOptions()...); err != nil {
		t.Fatal(err)
	}
	l := opts.cfg.Limits
	if l.MaxOperatorCalls != 3 || l.KeepalivePermitWithoutStream || l.MaxConnsPerIP != 64 || l.KeepaliveMinTime != 20*time.Second {
		t.Errorf("limits %+v: want 3 operator calls, no pings without streams, 64 connections per IP, 20s keepalive", l)
	}
	if l.MaxAgentCalls != 8192 || l.MaxStreamsPerConn != 4096 {
		t.Errorf("limits %+v: want the defaults for agent calls and streams", l)
	}
}

func TestServerDataDirFlags(t *testing.T) {
	fs, opts := serverFlags(io.Discard)
	if err := ff.Parse(fs, nil, serverEnvOptions()...); err != nil {
		t.Fatal(err)
	}
	if opts.cfg.DataDirReserve != server.DefaultDataDirReserve || opts.cfg.RebuildFromPeers {
		t.Errorf("defaults: reserve %d, rebuild %v; want %d and false", opts.cfg.DataDirReserve, opts.cfg.RebuildFromPeers, server.DefaultDataDirReserve)
	}
	t.Setenv("DROVER_REBUILD_FROM_PEERS", "true")
	fs, opts = serverFlags(io.Discard)
	if err := ff.Parse(fs, []string{"-data-dir-reserve", "1GiB"}, serverEnvOptions()...); err != nil {
		t.Fatal(err)
	}
	if opts.cfg.DataDirReserve != 1<<30 || !opts.cfg.RebuildFromPeers {
		t.Errorf("reserve %d, rebuild %v; want 1GiB and true", opts.cfg.DataDirReserve, opts.cfg.RebuildFromPeers)
	}
	fs, _ = serverFlags(io.Discard)
	if err := ff.Parse(fs, []string{"-data-dir-reserve", "lots"}, serverEnvOptions()...); err == nil {
		t.Error("-data-dir-reserve lots: accepted")
	}
}

func TestServerGCHeapFloorFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want uint64
		bad  bool
	}{
		{name: "default", want: defaultGCHeapFloor},
		{name: "flag", args: []string{"-gc-heap-floor", "512MiB"}, want: 512 << 20},
		{name: "environment", env: "2GiB", want: 2 << 30},
		{name: "off", args: []string{"-gc-heap-floor", "0"}, want: 0},
		{name: "not a size", args: []string{"-gc-heap-floor", "big"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("DROVER_GC_HEAP_FLOOR", tc.env)
			}
			fs, opts := serverFlags(io.Discard)
			err := ff.Parse(fs, tc.args, serverEnvOptions()...)
			if tc.bad {
				if err == nil {
					t.Fatalf("%v: accepted", tc.args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if opts.gcHeapFloor != tc.want {
				t.Fatalf("floor %d, want %d", opts.gcHeapFloor, tc.want)
			}
		})
	}
}

// TestRunServerReloadsOnSIGHUP sends SIGHUP to this process while runServer
// runs a TLS server: it reloads the certificates, refuses damaged files
// without stopping, and still shuts down cleanly afterwards.
func TestRunServerReloadsOnSIGHUP(t *testing.T) {
	certs := testcerts.New(t)
	dir := t.TempDir()
	files := tlsconfig.Config{CAFile: certs.CAFile, CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem")}
	if _, err := certs.WriteServer(files.CertFile, files.KeyFile); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Dev = true
	cfg.RPCAddr, cfg.RaftAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.TLS = files
	var log syncBuffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	cfg.Logger = logger

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runServer(ctx, cfg, logger) }()
	deadline := time.Now().Add(time.Minute)
	waitLogged := func(what string, count int) {
		t.Helper()
		for strings.Count(log.String(), what) < count {
			select {
			case err := <-done:
				t.Fatalf("runServer returned %v while the test waited for %q\n%s", err, what, log.String())
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q not logged %d times\n%s", what, count, log.String())
			}
		}
	}
	hangUp := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitLogged("drover server started", 1)

	cert, err := certs.WriteServer(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	hangUp()
	waitLogged("TLS certificates reloaded", 1)
	if !strings.Contains(log.String(), fmt.Sprintf("%X", cert.SerialNumber)) {
		t.Errorf("the log does not name the new serial %X\n%s", cert.SerialNumber, log.String())
	}

	if err := os.WriteFile(files.CertFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangUp()
	waitLogged("reload incomplete", 1)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runServer: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("runServer did not return after its context ended")
	}
}
