package server

import (
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/droverhq/drover/internal/tlsconfig"
)

func TestConfigValidateRaftSettings(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"defaults", func(*Config) {}, ""},
		{"raft advertise host:port", func(c *Config) { c.RaftAdvertise = "10.0.0.1:7000" }, ""},
		{"raft advertise without port", func(c *Config) { c.RaftAdvertise = "10.0.0.1" }, "raft advertise"},
		{"multiplier 10", func(c *Config) { c.RaftMultiplier = MaxRaftMultiplier }, ""},
		{"multiplier 0", func(c *Config) { c.RaftMultiplier = 0 }, "raft multiplier 0"},
		{"multiplier 11", func(c *Config) { c.RaftMultiplier = 11 }, "raft multiplier 11"},
		{"tls all three files", func(c *Config) { c.TLS = tlsconfig.Config{CAFile: "ca.pem", CertFile: "s.pem", KeyFile: "s-key.pem"} }, ""},
		{"tls without key", func(c *Config) { c.TLS = tlsconfig.Config{CAFile: "ca.pem", CertFile: "s.pem"} }, "missing: key file"},
		{"tls CA only", func(c *Config) { c.TLS = tlsconfig.Config{CAFile: "ca.pem"} }, "tls:"},
		{"heartbeat min TTL 0", func(c *Config) { c.Heartbeat.MinTTL = 0 }, "heartbeat min TTL 0s: must be above 0"},
		{"heartbeat failover TTL 0", func(c *Config) { c.Heartbeat.FailoverTTL = 0 }, "heartbeat failover TTL 0s: must be above 0"},
		{"no operator calls", func(c *Config) { c.Limits.MaxOperatorCalls = 0 }, "max operator calls 0: must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Dev = true
			tt.edit(&cfg)
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestNewFailsCleanlyOnBusyPort checks that a dev server whose port is
// taken returns an error, without panicking, and leaves no data dir.
func TestNewFailsCleanlyOnBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := DefaultConfig()
	cfg.Dev = true
	cfg.RPCAddr = l.Addr().String()
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the dev data dir goes
	if _, err := New(cfg); err == nil {
		t.Fatal("New on a busy port succeeded")
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "drover-dev-*"))
	if len(left) > 0 {
		t.Errorf("the failed start left %v behind", left)
	}
}
