package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBenchFlagsConfig(t *testing.T) {
	tests := []struct {
		name        string
		flags       benchFlags
		wantServers int
		wantNodes   int
		wantTimeout time.Duration
		wantErr     []string
	}{
		{
			name:        "c1m at 1%",
			flags:       benchFlags{servers: "a:1, b:2,c:3", metrics: "http://a/metrics,http://b/metrics,http://c/metrics", scenario: "c1m", scale: 0.01},
			wantServers: 3, wantNodes: 50, wantTimeout: 30 * time.Minute,
		},
		{
			name:        "heartbeats with timeout",
			flags:       benchFlags{servers: "a:1", scenario: "heartbeats", scale: 0.1, timeout: time.Minute},
			wantServers: 1, wantNodes: 5000, wantTimeout: time.Minute,
		},
		{name: "scale", flags: benchFlags{servers: "a:1", scenario: "scale", scale: 0.5}, wantServers: 1, wantNodes: 1000, wantTimeout: 30 * time.Minute},
		{name: "churn", flags: benchFlags{servers: "a:1", scenario: "churn", scale: 0.1}, wantServers: 1, wantNodes: 200, wantTimeout: 30 * time.Minute},
		{name: "concurrent", flags: benchFlags{servers: "a:1", scenario: "concurrent", scale: 0.1}, wantServers: 1, wantNodes: 500, wantTimeout: 30 * time.Minute},
		{name: "c1m-full: the fleet stays 5,000", flags: benchFlags{servers: "a:1", scenario: "c1m-full", scale: 0.01}, wantServers: 1, wantNodes: 5000, wantTimeout: time.Hour},
		{name: "no servers", flags: benchFlags{servers: " , ", scenario: "c1m", scale: 1}, wantErr: []string{"-address: give at least one"}},
		{name: "unknown scenario", flags: benchFlags{servers: "a:1", scenario: "c2m", scale: 1}, wantErr: []string{`-scenario "c2m": want c1m, c1m-full, churn, scale, concurrent or heartbeats`}},
		{
			name:    "metrics count",
			flags:   benchFlags{servers: "a:1,b:2", metrics: "http://a/metrics", scenario: "c1m", scale: 1},
			wantErr: []string{"-metrics: 1 URLs for 2 servers"},
		},
		{name: "metrics not a URL", flags: benchFlags{servers: "a:1", metrics: "a:9090", scenario: "c1m", scale: 1}, wantErr: []string{`"a:9090" is not an http(s) URL`}},
		{name: "zero scale", flags: benchFlags{servers: "a:1", scenario: "c1m"}, wantErr: []string{"-scale 0: want a number above 0"}},
		{name: "negative timeout", flags: benchFlags{servers: "a:1", scenario: "c1m", scale: 1, timeout: -time.Second}, wantErr: []string{"-timeout -1s"}},
		{
			name:    "every problem at once",
			flags:   benchFlags{scenario: "x", scale: -1},
			wantErr: []string{"-address", "-scenario", "-scale"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.flags.config()
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("config() = nil error, want one containing %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Servers) != tt.wantServers || len(cfg.Fleet.Nodes) != tt.wantNodes || cfg.Timeout != tt.wantTimeout {
				t.Errorf("config: %d servers %v, %d nodes, timeout %s; want %d, %d, %s",
					len(cfg.Servers), cfg.Servers, len(cfg.Fleet.Nodes), cfg.Timeout, tt.wantServers, tt.wantNodes, tt.wantTimeout)
			}
			if len(cfg.Steps) == 0 {
				t.Error("scenario has no steps")
			}
		})
	}
}

// TestBenchNamesWhyItCannotStart: a benchmark against a server that is
// not there reports the failed call and its likely cause.
func TestBenchNamesWhyItCannotStart(t *testing.T) {
	dead := deadAddr(t)
	_, stderr, err := run(t, "bench", "-scenario", "scale", "-scale", "0.001", "-address", dead)
	t.Logf("stderr:\n%s", stderr)
	if err == nil || !Reported(err) {
		t.Fatalf("error %v; want a reported error", err)
	}
	if !strings.HasPrefix(stderr, "Error running the scale benchmark: ") || !strings.Contains(stderr, causeRefused+" "+dead) {
		t.Errorf("stderr does not report the failure and name its cause %q", causeRefused)
	}
}

// TestBenchWritesItsCPUProfile: -cpuprofile leaves a gzipped pprof profile
// even when the run fails, and a file it cannot create is refused before
// the run starts.
func TestBenchWritesItsCPUProfile(t *testing.T) {
	dead := deadAddr(t)
	path := filepath.Join(t.TempDir(), "bench.prof")
	_, stderr, err := run(t, "bench", "-scenario", "scale", "-scale", "0.001", "-address", dead, "-cpuprofile", path)
	if err == nil || !strings.Contains(stderr, causeRefused) {
		t.Fatalf("error %v, stderr %q; want the run to fail on the dead address", err, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no profile after the run: %v", err)
	}
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Fatalf("profile of %d bytes is not gzipped pprof data", len(data))
	}

	missing := filepath.Join(t.TempDir(), "no-such-dir", "bench.prof")
	_, stderr, err = run(t, "bench", "-scenario", "scale", "-scale", "0.001", "-address", dead, "-cpuprofile", missing)
	if err == nil || !strings.Contains(err.Error(), "-cpuprofile") || strings.Contains(stderr, causeRefused) {
		t.Fatalf("error %v, stderr %q; want -cpuprofile refused before any call", err, stderr)
	}
}

// TestBenchRefusesABadHeapFloor: -gc-heap-floor takes a size, as for the
// server, and refuses anything else before the run starts.
func TestBenchRefusesABadHeapFloor(t *testing.T) {
	_, stderr, err := run(t, "bench", "-scenario", "c1m", "-address", "127.0.0.1:1", "-gc-heap-floor", "lots")
	if err == nil || !strings.Contains(stderr, `invalid value "lots" for flag -gc-heap-floor`) {
		t.Fatalf("error %v, stderr %q; want -gc-heap-floor refused", err, stderr)
	}
}
