package test_test

import (
	"context"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/simagent"
	"github.com/droverhq/drover/test/cluster"
	"github.com/droverhq/drover/test/flood"
)

// The operator flood of BenchmarkOperatorFlood.
const (
	floodNodes       = 2000
	floodConns       = 2000
	floodWindow      = time.Minute
	floodCallTimeout = 30 * time.Second
)

// BenchmarkOperatorFlood floods one server of a 3-server cluster with
// operator reads while 2,000 simulated nodes heartbeat with the default TTL
// policy (10s minimum, 50 heartbeats per second: TTLs of 40-80s, 10s
// grace), and reports what the flood and the cluster came to.
//
// The flood: 2,000 client connections from a child process (runFlood;
// each its own grpc.ClientConn, so its own TCP connection), each calling NodeService.List
// for every node (a consistent read, forwarded to the leader by a follower)
// with a 30s deadline, again and again for a minute; a refused call waits
// for the RetryInfo hint it carries. Run against a follower, then against
// the leader.
//
// Reported per run: calls answered, refused, timed out (DeadlineExceeded);
// nodes marked down or disconnected from the flood's start until every node
// has heartbeated after it (followed on a server not flooded); elections
// (the rise of the highest raft term); autopilot's "server became
// unhealthy" log lines, and ServerMembers answers (polled every 250ms
// through a server not flooded) that called a server unhealthy. The log
// has the details: refusals by code, latencies, followers' longest time
// without contact from the leader.
//
//	go test -run '^$' -bench OperatorFlood -benchtime 1x -count 3 -timeout 90m ./test/
func BenchmarkOperatorFlood(b *testing.B) {
	b.Run("target=follower", func(b *testing.B) { benchFlood(b, false) })
	b.Run("target=leader", func(b *testing.B) { benchFlood(b, true) })
}

func benchFlood(b *testing.B, atLeader bool) {
	requireProc(b)
	// The servers' default heartbeat policy, not the harness's 1h TTL:
	// missed heartbeats must mark nodes.
	c := cluster.New(b, droverBin, 3, cluster.Args("-heartbeat-min-ttl", "10s"))
	ctx, cancel := context.WithTimeout(b.Context(), benchSetupTimeout)
	defer cancel()
	c.WaitLeader(ctx)
	fleet := startSimFleet(ctx, b, c, floodNodes, func(cfg *simagent.Config) { cfg.SpreadHeartbeats = true })
	waitFleetReady(ctx, b, fleet)
	ids := fleetIDs(fleet)
	f := flood.Config{Conns: floodConns, Window: floodWindow, CallTimeout: floodCallTimeout, PageSize: floodNodes}

	var sum floodFigures
	b.ResetTimer()
	for range b.N {
		fig := floodOnce(ctx, b, c, f, atLeader, ids, fleet)
		sum.add(fig)
	}
	b.StopTimer()
	sum.report(b)
}

// floodFigures are one flood's outcome.
type floodFigures struct {
	answered, refused, timedOut uint64
	marked, elections           int
	unhealthyLogged             int
	unhealthyPolls              int
}

func (f *floodFigures) add(o floodFigures) {
	f.answered += o.answered
	f.refused += o.refused
	f.timedOut += o.timedOut
	f.marked += o.marked
	f.elections += o.elections
	f.unhealthyLogged += o.unhealthyLogged
	f.unhealthyPolls += o.unhealthyPolls
}

func (f floodFigures) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64(f.answered)/n, "answered")
	b.ReportMetric(float64(f.refused)/n, "refused")
	b.ReportMetric(float64(f.timedOut)/n, "timed-out")
	b.ReportMetric(float64(f.marked)/n, "nodes-marked")
	b.ReportMetric(float64(f.elections)/n, "elections")
	b.ReportMetric(float64(f.unhealthyLogged)/n, "unhealthy-logged")
	b.ReportMetric(float64(f.unhealthyPolls)/n, "unhealthy-polls")
}

// floodOnce floods the leader or a follower once and waits until every node
// has heartbeated after the flood.
func floodOnce(ctx context.Context, b *testing.B, c *cluster.Cluster, f flood.Config, atLeader bool, ids []string, fleet *simagent.Fleet) floodFigures {
	b.Helper()
	leader := c.WaitLeader(ctx)
	c.WaitConverged(ctx)
	target := c.Others(leader)[0]
	if atLeader {
		target = leader
	}
	observer := c.Others(leader, target)[0]
	marks := watchMarks(ctx, b, observer, lastIndex(ctx, b, leader)+1)
	defer marks.close()
	watch := watchCluster(ctx, c, observer, 250*time.Millisecond)
	defer watch.stop()
	term0 := lastTerm(ctx, b, leader)

	start := time.Now()
	res := runFlood(ctx, b, target, f)
	floodEnd := time.Now()
	b.StopTimer()
	// Marks the flood caused come at the latest before each node's first
	// heartbeat after it.
	waitHeartbeatedSince(ctx, b, floodEnd, fleet)
	watch.stop()
	marks.close()
	if err := marks.failure(); err != nil {
		b.Fatalf("following node events on %s: %v", observer, err)
	}
	fig := floodFigures{
		answered: res.Answered, refused: res.Refusals(), timedOut: res.TimedOut,
		marked:          len(marks.of(ids)),
		elections:       int(max(watch.term(), lastTerm(ctx, b, c.WaitLeader(ctx))) - term0),
		unhealthyLogged: unhealthyLogged(c, start),
	}
	for _, n := range watch.unhealthy {
		fig.unhealthyPolls += n
	}
	role := "follower"
	if atLeader {
		role = "leader"
	}
	b.Logf("flood of %s %s: %s", role, target, res)
	b.Logf("cluster: %d nodes marked (%d down), %d elections, %d unhealthy logged since the flood; %s",
		fig.marked, marks.downOf(ids), fig.elections, fig.unhealthyLogged, watch)
	b.StartTimer()
	return fig
}

// lastTerm is the term of s's last raft entry.
func lastTerm(ctx context.Context, t testing.TB, s *cluster.Server) uint64 {
	t.Helper()
	info, err := serverInfo(ctx, s)
	if err != nil {
		t.Fatalf("info of %s: %v", s, err)
	}
	return info.GetLastTerm()
}
