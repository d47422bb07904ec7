package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/simagent"
	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// parseAgent parses args as `drover agent` would and returns its fleet
// configuration.
func parseAgent(t *testing.T, args ...string) (simagent.Config, error) {
	t.Helper()
	fs, o := agentFlags(io.Discard)
	if err := fs.Parse(args); err != nil {
		return simagent.Config{}, err
	}
	o.set = setFlags(fs)
	return o.config()
}

func TestAgentFlags(t *testing.T) {
	nodeFile := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(nodeFile, []byte(`{"name_prefix": "gpu", "classes": ["gpu"], "attributes": {"rack": "r1"},
		"resources": {"cpu_mhz": 8000, "memory_mb": 32768, "disk_mb": 1000}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(badFile, []byte(`{"name": "x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(addrEnv, "")
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c simagent.Config)
	}{{
		name: "defaults",
		args: []string{"-sim-nodes", "3"},
		check: func(t *testing.T, c simagent.Config) {
			if len(c.Nodes) != 3 || len(c.Servers) != 1 || c.Servers[0] != defaultAddr || len(c.DialOptions) != len(explainConnectionErrors(defaultAddr, false)) {
				t.Errorf("config %+v: want 3 nodes on %s, plaintext (only the cause-naming options)", c, defaultAddr)
			}
		},
	}, {
		name: "template flags round-robin",
		args: []string{"-sim-nodes", "4", "-address", "a:1, b:2", "-datacenters", "dc1,dc2", "-classes", "x",
			"-cpu", "1000", "-memory", "2048", "-disk", "10", "-attributes", "rack=r1,zone=z"},
		check: func(t *testing.T, c simagent.Config) {
			n := c.Nodes[1]
			if strings.Join(c.Servers, " ") != "a:1 b:2" || n.Datacenter != "dc2" || c.Nodes[2].Datacenter != "dc1" || n.Class != "x" ||
				n.Resources.GetCpuMhz() != 1000 || n.Resources.GetMemoryMb() != 2048 || n.Attributes["zone"] != "z" {
				t.Errorf("servers %v, node %+v", c.Servers, n)
			}
		},
	}, {
		name: "behaviour and faults",
		args: []string{"-sim-nodes", "10", "-failure-rate", "0.1", "-start-delay", "2s", "-batch-run-time", "1m",
			"-flaky-fraction", "0.2", "-flaky-every", "1m", "-flaky-offline", "10s", "-reorder-on-return"},
		check: func(t *testing.T, c simagent.Config) {
			want := simagent.Faults{Fraction: 0.2, Every: time.Minute, Offline: 10 * time.Second, ReorderOnReturn: true}
			if c.FailureRate != 0.1 || c.StartDelay != 2*time.Second || c.BatchRunTime != time.Minute || c.Faults != want {
				t.Errorf("config %+v", c)
			}
		},
	}, {
		name: "node file",
		args: []string{"-sim-nodes", "1", "-node-file", nodeFile},
		check: func(t *testing.T, c simagent.Config) {
			n := c.Nodes[0]
			if n.Name != "gpu-0" || n.Class != "gpu" || n.Datacenter != "dc1" || n.Attributes["rack"] != "r1" || n.Resources.GetCpuMhz() != 8000 {
				t.Errorf("node %+v", n)
			}
		},
	},
		{name: "no nodes", args: nil, wantErr: "-sim-nodes 0"},
		{name: "failure rate above one", args: []string{"-sim-nodes", "1", "-failure-rate", "2"}, wantErr: "-failure-rate"},
		{name: "offline longer than the period", args: []string{"-sim-nodes", "1", "-flaky-fraction", "0.5", "-flaky-every", "1s", "-flaky-offline", "2s"}, wantErr: "-flaky-offline"},
		{name: "bad attribute", args: []string{"-sim-nodes", "1", "-attributes", "rack"}, wantErr: "not key=value"},
		{name: "node file and template flags", args: []string{"-sim-nodes", "1", "-node-file", nodeFile, "-cpu", "5"}, wantErr: "replaces -cpu"},
		{name: "unknown node file field", args: []string{"-sim-nodes", "1", "-node-file", badFile}, wantErr: "unknown field"},
		{name: "missing node file", args: []string{"-sim-nodes", "1", "-node-file", filepath.Join(t.TempDir(), "none")}, wantErr: "-node-file"},
		{name: "half the TLS files", args: []string{"-sim-nodes", "1", "-tls-cert-file", "c.pem"}, wantErr: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseAgent(t, tc.args...)
			switch {
			case tc.check != nil:
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, c)
			case err == nil:
				t.Fatalf("accepted %v", tc.args)
			case !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

// syncBuffer is a bytes buffer safe for a writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitUntil polls cond every 20ms for up to 30s.
func waitUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s within 30s: %s", what, why)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// startAgents runs a fleet of cfg until ctx ends, with a status line every
// 50ms into out; done receives what runAgents returned.
func startAgents(ctx context.Context, cfg simagent.Config) (out *syncBuffer, done <-chan error) {
	out = &syncBuffer{}
	result := make(chan error, 1)
	go func() { result <- runAgents(ctx, cfg, out, 50*time.Millisecond) }()
	return out, result
}

func TestAgentRunsNodesAndStopsCleanly(t *testing.T) {
	srv := testserver.Start(t)
	before := runtime.NumGoroutine()
	cfg, err := parseAgent(t, "-sim-nodes", "5", "-address", srv.RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, done := startAgents(ctx, cfg)

	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	waitUntil(t, "5 nodes ready", func() (bool, string) {
		resp, err := nodes.List(ctx, &droverv1.ListNodesRequest{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, n := range resp.GetNodes() {
			if n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_READY {
				ready++
			}
		}
		return ready == 5 && strings.Contains(out.String(), "nodes 5 ready"), fmt.Sprintf("%d ready; output %q", ready, out.String())
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runAgents did not return within 30s of the cancel")
	}
	waitUntil(t, "the agents' goroutines gone", func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= before, fmt.Sprintf("%d goroutines, %d before", n, before)
	})
}

// TestAgentNamesWhyCallsFail: simulated agents retry failed calls on their
// own, so the status lines must say why the nodes never become ready.
func TestAgentNamesWhyCallsFail(t *testing.T) {
	for _, name := range []string{caFileEnv, certFileEnv, keyFileEnv, oldCAFileEnv, oldCertFileEnv, oldKeyFileEnv} {
		t.Setenv(name, "")
	}
	certs := testcerts.New(t)
	dead := deadAddr(t)
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"nothing listening", []string{"-address", dead}, causeRefused + " " + dead},
		{"plaintext agent, TLS server", []string{"-address", startTLSFake(t, &fakeOperator{}, certs)}, causePlainTLS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseAgent(t, append([]string{"-sim-nodes", "2"}, tt.flags...)...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			out, done := startAgents(ctx, cfg)
			waitUntil(t, "the cause named", func() (bool, string) {
				return strings.Contains(out.String(), "calls to the servers fail: ") && strings.Contains(out.String(), tt.want), out.String()
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out.String(), tt.want); n != 1 {
				t.Errorf("cause said %d times, want once while no call works:\n%s", n, out.String())
			}
		})
	}
}
