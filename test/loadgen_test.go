package test_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/loadgen"
	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestLoadDriverReportsMatchState runs the load driver at small scale (200
// simulated nodes, 20 jobs of 100 allocations) against a real 3-server
// cluster and checks each figure it reports against what the servers hold.
func TestLoadDriverReportsMatchState(t *testing.T) {
	const nodes, jobs, perJob = 200, 20, 100
	c := cluster.New(t, droverBin, 3, cluster.Args("-http-addr", "127.0.0.1:0"))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c.WaitLeader(ctx)
	cfg := loadgen.Config{
		Fleet:    simagent.Config{Nodes: simagent.DefaultTemplate().Nodes(nodes), StartDelay: 100 * time.Millisecond},
		Steps:    []loadgen.Step{{Name: "place", WaitRunning: true}},
		Timeout:  75 * time.Second,
		Progress: testLogWriter{t},
	}
	for _, s := range c.Servers() {
		cfg.Servers = append(cfg.Servers, s.RPCAddr())
		cfg.MetricsURLs = append(cfg.MetricsURLs, "http://"+s.Info().HTTPAddr+"/metrics")
	}
	var ids []string
	for range jobs {
		j := mock.Job(perJob)
		ids = append(ids, j.GetId())
		cfg.Steps[0].Jobs = append(cfg.Steps[0].Jobs, j)
	}
	// Servers announce themselves through raft after the election; the
	// run's entries are counted from a quiet cluster.
	waitAnnounced(ctx, t, c)
	c.WaitConverged(ctx)
	idx0 := maxAppliedIndex(ctx, t, c)

	rep, err := loadgen.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", rep)

	conn := c.Servers()[0].Conn()
	allocs, evals := 0, 0
	for _, id := range ids {
		jobAllocations, err := jobAllocs(ctx, conn, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range jobAllocations {
			allocs++
			if a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING || a.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN {
				t.Errorf("allocation %s of job %s: %s/%s, want running", a.GetId(), id, a.GetDesiredStatus(), a.GetClientStatus())
			}
		}
		er, err := droverv1.NewJobServiceClient(conn).Evaluations(ctx, &droverv1.ListJobEvaluationsRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range er.GetEvaluations() {
			if e.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_COMPLETE {
				evals++
			}
		}
	}
	if allocs != jobs*perJob || rep.Total.Placements != allocs {
		t.Errorf("placements reported %d, allocations in state %d, want %d", rep.Total.Placements, allocs, jobs*perJob)
	}
	if got := rep.AllocsByStatus[droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING.String()]; got != allocs {
		t.Errorf("report counts %d running allocations, state holds %d", got, allocs)
	}
	if rep.Total.Evals != evals || evals < jobs {
		t.Errorf("evaluations reported %d, completed in state %d (at least %d)", rep.Total.Evals, evals, jobs)
	}
	if idx1 := maxAppliedIndex(ctx, t, c); rep.RaftEntries != idx1-idx0 {
		t.Errorf("raft entries reported %d, applied index went from %d to %d (%d)", rep.RaftEntries, idx0, idx1, idx1-idx0)
	}
	if want := nodeStatusCounts(ctx, t, droverv1.NewNodeServiceClient(conn)); fmt.Sprint(want) != fmt.Sprint(rep.NodesByStatus) {
		t.Errorf("nodes by status reported %v, NodeService.List gives %v", rep.NodesByStatus, want)
	}
	if rep.NodesByStatus[droverv1.NodeStatus_NODE_STATUS_READY.String()] != nodes {
		t.Errorf("nodes by status %v, want %d ready", rep.NodesByStatus, nodes)
	}
	for _, s := range rep.Servers {
		if s.CPUSeconds <= 0 || s.MaxRSSBytes <= 0 {
			t.Errorf("server %s: CPU %g s, max RSS %g bytes; want both above zero", s.Addr, s.CPUSeconds, s.MaxRSSBytes)
		}
	}
	if rep.RaftBytes <= 0 || rep.Total.PlacementsPerSecond <= 0 || rep.Total.SettledSeconds <= 0 {
		t.Errorf("raft bytes %g, placements/s %g, settled after %gs; want all above zero", rep.RaftBytes, rep.Total.PlacementsPerSecond, rep.Total.SettledSeconds)
	}
	checkCostFigures(t, rep, nodes, jobs)
	if rep.UpdateAlloc.Count == 0 || rep.GetAllocs.Count == 0 {
		t.Errorf("latencies: UpdateAlloc %+v, GetAllocs %+v; want observations", rep.UpdateAlloc, rep.GetAllocs)
	}
	// The agents of the followers reported through them: in batches.
	batches := 0.0
	for _, s := range c.Servers() {
		batches += handledOK(scrape(ctx, t, s.Info().HTTPAddr), "ForwardAllocReports")
	}
	if batches == 0 {
		t.Errorf("no ForwardAllocReports call answered: the followers did not pass their agents' reports on in batches")
	}
}

// handledOK is a scrape's count of calls of method answered OK.
func handledOK(scrape, method string) float64 {
	total := 0.0
	for _, line := range strings.Split(scrape, "\n") {
		if !strings.HasPrefix(line, "grpc_server_handled_total{") || !strings.Contains(line, `grpc_method="`+method+`"`) || !strings.Contains(line, `grpc_code="OK"`) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			total += v
		}
	}
	return total
}

// checkCostFigures checks the report's server-cost figures against its own
// sums: CPU per placement and per write, and plans rejected per 1,000
// placements.
func checkCostFigures(t *testing.T, rep *loadgen.Report, nodes, jobs int) {
	t.Helper()
	tot := rep.Total
	var cpu float64
	for _, c := range tot.CPUSeconds {
		cpu += c
	}
	if cpu <= 0 || math.Abs(tot.ServerCPUSeconds-cpu) > 1e-9 {
		t.Errorf("server CPU %g s, per-server figures sum to %g s", tot.ServerCPUSeconds, cpu)
	}
	if want := 1e3 * cpu / float64(tot.Placements); math.Abs(tot.CPUMillisPerPlacement-want) > 1e-9 {
		t.Errorf("CPU per placement %g ms, want %g", tot.CPUMillisPerPlacement, want)
	}
	// Every job was registered once, and every allocation was reported
	// at least once in some UpdateAlloc call; the fleet registered every
	// node before the steps.
	if tot.Writes <= uint64(jobs) || rep.Writes < tot.Writes+uint64(nodes) {
		t.Errorf("writes: %d in the steps, %d in the run; want above %d, and the %d registrations besides", tot.Writes, rep.Writes, jobs, nodes)
	}
	if want := 1e6 * cpu / float64(tot.Writes); math.Abs(tot.CPUMicrosPerWrite-want) > 1e-6 {
		t.Errorf("CPU per write %g us, want %g", tot.CPUMicrosPerWrite, want)
	}
	if tot.PlansApplied < uint64(jobs) || tot.PlansPartlyRejected > tot.PlansApplied {
		t.Errorf("plans applied %d, partly rejected %d; want at least one per job (%d) and no more rejected than applied", tot.PlansApplied, tot.PlansPartlyRejected, jobs)
	}
}

// maxAppliedIndex returns the highest index the cluster's servers applied.
func maxAppliedIndex(ctx context.Context, t *testing.T, c *cluster.Cluster) uint64 {
	t.Helper()
	var idx uint64
	for _, s := range c.Servers() {
		applied, err := currentIndex(ctx, s.Conn())
		if err != nil {
			t.Fatalf("state digest of %s: %v", s, err)
		}
		idx = max(idx, applied)
	}
	return idx
}

// nodeStatusCounts counts the cluster's nodes by status, as NodeService.List
// gives them.
func nodeStatusCounts(ctx context.Context, t *testing.T, conn droverv1.NodeServiceClient) map[string]int {
	t.Helper()
	counts := make(map[string]int)
	page := &droverv1.PageOptions{PageSize: 10000}
	for {
		resp, err := conn.List(ctx, &droverv1.ListNodesRequest{Page: page})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range resp.GetNodes() {
			counts[n.GetStatus().String()]++
		}
		if resp.GetNextToken() == "" {
			return counts
		}
		page = &droverv1.PageOptions{PageSize: 10000, NextToken: resp.GetNextToken()}
	}
}

// testLogWriter sends the load driver's progress lines to the test log.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// waitAnnounced waits until every server's record (with its version) is in
// the state, so that no announcement is written during the run.
func waitAnnounced(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	poll(ctx, t, "every server announced", func() (bool, string) {
		resp, err := droverv1.NewOperatorServiceClient(c.Servers()[0].Conn()).ServerMembers(ctx, &droverv1.ServerMembersRequest{})
		if err != nil {
			return false, err.Error()
		}
		known := 0
		for _, m := range resp.GetServers() {
			if m.GetVersion() != "" && m.GetRpcAddr() != "" {
				known++
			}
		}
		return known == len(c.Servers()), fmt.Sprintf("%d of %d announced", known, len(c.Servers()))
	})
}
