package test_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/test/cluster"
)

// scrape reads /metrics at addr.
func scrape(ctx context.Context, t *testing.T, addr string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", addr, resp.StatusCode, err)
	}
	return string(body)
}

// lintMetrics fails for every problem promlint finds in a scrape.
func lintMetrics(t *testing.T, where, text string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("promlint %s: %v", where, err)
	}
	for _, p := range problems {
		t.Errorf("promlint %s: %s: %s", where, p.Metric, p.Text)
	}
}

// checkHeapFloor checks the GOGC a server's scrape shows: above the
// default of 100 with the heap floor on (these servers' live heaps are far
// below half of it), 100 with it off.
func checkHeapFloor(t *testing.T, where, text string, floorOn bool) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go_gc_gogc_percent (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Errorf("%s exports no go_gc_gogc_percent", where)
		return
	}
	var gogc float64
	if _, err := fmt.Sscan(m[1], &gogc); err != nil {
		t.Errorf("%s: go_gc_gogc_percent %q: %v", where, m[1], err)
		return
	}
	if floorOn && gogc <= 100 || !floorOn && gogc != 100 {
		t.Errorf("%s: GOGC %v with the heap floor on: %v; want above 100 with it, 100 without", where, gogc, floorOn)
	}
}

// waitFamilies waits until a scrape of addr has every family named in
// want (a family's name, or a line's prefix with labels).
func waitFamilies(ctx context.Context, t *testing.T, addr string, want ...string) string {
	t.Helper()
	var text string
	poll(ctx, t, fmt.Sprintf("%s to export %v", addr, want), func() (bool, string) {
		text = scrape(ctx, t, addr)
		var missing []string
		for _, w := range want {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(w)).MatchString(text) {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing %v", missing)
	})
	return text
}

// TestMetricsLint scrapes every server of a 3-server cluster running a
// job on simulated nodes, and `drover dev`, and fails on any name
// promlint objects to: raft's metrics renamed to Prometheus conventions,
// per-call gRPC metrics, the servers' own. s3 runs without a heap floor,
// and the scrapes show the floor's GOGC on the others only.
func TestMetricsLint(t *testing.T) {
	ctx := within(t, testContext(t), 2*time.Minute)
	c := cluster.New(t, droverBin, 3, httpArgs(), cluster.ServerArgs(3, "-gc-heap-floor", "0"))
	leader := c.WaitLeader(ctx)
	fleet := startSimFleet(ctx, t, c, 3, simAllocs)
	waitFleetReady(ctx, t, fleet)
	job := mock.Job(3)
	if _, err := registerJob(ctx, leader.Conn(), job, ""); err != nil {
		t.Fatal(err)
	}
	waitFamilies(ctx, t, leader.Info().HTTPAddr,
		"drover_raft_commit_time_seconds", "drover_raft_apply_total", "drover_raft_state_leader_total",
		`drover_raft_replication_heartbeat_peer_seconds{peer_id="`, "drover_raft_boltdb_log_size_bytes",
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Register",grpc_service="drover.v1.JobService"`,
		"grpc_server_handling_seconds_bucket", "drover_heartbeat")
	for _, s := range c.Servers() {
		text := scrape(ctx, t, s.Info().HTTPAddr)
		lintMetrics(t, s.String(), text)
		checkHeapFloor(t, s.String(), text, s != c.Server(3))
	}
	// Every query of the Grafana dashboard names a family the leader
	// exports.
	waitFamilies(ctx, t, leader.Info().HTTPAddr, dashboardFamilies(t)...)

	t.Run("dev", func(t *testing.T) {
		dev := exec.CommandContext(ctx, droverBin, "dev", "-rpc-addr", "127.0.0.1:0", "-raft-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0")
		// The kill below leaves drover dev no time to remove its data dir:
		// put it in the test's own temp dir.
		dev.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
		out, err := dev.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := dev.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = dev.Process.Kill()
			_ = dev.Wait()
		})
		addr := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if m := regexp.MustCompile(`The web UI: http://(\S+)/ui/`).FindStringSubmatch(sc.Text()); m != nil {
					addr <- m[1]
				}
			}
		}()
		var http string
		select {
		case http = <-addr:
		case <-ctx.Done():
			t.Fatal("drover dev printed no UI address")
		}
		text := waitFamilies(ctx, t, http, "drover_raft_commit_time_seconds", "grpc_server_handled_total", "drover_heartbeat")
		lintMetrics(t, "drover dev", text)
	})
}

// dashboardFamilies reads docs/grafana/drover-cluster.json and returns,
// for every metric its queries name, the "# TYPE family " line a scrape
// must hold (a histogram's _bucket, _sum and _count are its family's).
func dashboardFamilies(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(repoFile("docs/grafana/drover-cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	name := regexp.MustCompile(`\b(?:drover|grpc|process)_[a-z0-9_]+\b`)
	// Label names (grpc_code in a matcher or a by clause) are not metrics.
	labels := regexp.MustCompile(`(?:by|without)\s*\([^)]*\)|\{[^}]*\}`)
	seen := map[string]bool{}
	var lines []string
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			metrics := name.FindAllString(labels.ReplaceAllString(q.Expr, ""), -1)
			if len(metrics) == 0 {
				t.Errorf("dashboard panel %q: query %q names no drover metric", p.Title, q.Expr)
			}
			for _, m := range metrics {
				family := m
				if strings.HasSuffix(m, "_bucket") {
					family = strings.TrimSuffix(m, "_bucket")
				}
				if !seen[family] {
					seen[family] = true
					lines = append(lines, "# TYPE "+family+" ")
				}
			}
		}
	}
	if dash.Title == "" || queries < 20 {
		t.Fatalf("the dashboard %q has %d queries", dash.Title, queries)
	}
	return lines
}
