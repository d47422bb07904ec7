package test_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// benchSetupTimeout is a benchmark's one deadline, shared by its setup
// (servers, registering and readying the fleet) and all of its ops: the
// fleet runs under that context, so the ops cannot outlive it. The load
// scenarios use it for their setup only; each run is bounded by its
// preset's own timeout.
const benchSetupTimeout = 10 * time.Minute

// BenchmarkHeartbeats measures the heartbeats one leader holds.
//
// default-ttl: 50,000 heartbeat-only simulated nodes against one server
// with the default TTL policy (10s minimum, 50 heartbeats per second, so
// TTLs of 1,000-2,000s); the nodes' heartbeats are spread as in a fleet that
// has long been running. Over a 60s window it reports the heartbeats
// accepted per second, the leader's CPU as a share of one core, raft entries
// written (0: heartbeats change nothing), and the resident memory of the
// leader and of the benchmark process holding the simulated fleet.
//
// max-rate: 128 goroutines send UpdateStatus for 5,000 ready nodes as fast
// as they can for 20s; heartbeats/s is what the leader sustains on this
// machine while the load generator shares it (its CPU is reported too).
//
//	go test -run '^$' -bench 'Heartbeats' -benchtime 1x -count 3 -timeout 60m ./test/
func BenchmarkHeartbeats(b *testing.B) {
	b.Run("nodes=50000/default-ttl", func(b *testing.B) { benchSteadyHeartbeats(b, 50000, time.Minute) })
	b.Run("nodes=5000/max-rate", func(b *testing.B) { benchMaxHeartbeats(b, 5000, 128, 20*time.Second) })
}

func benchSteadyHeartbeats(b *testing.B, nodes int, window time.Duration) {
	requireProc(b)
	c := cluster.New(b, droverBin, 1, cluster.Bootstrap(), cluster.Args("-heartbeat-min-ttl", "10s"))
	ctx, cancel := context.WithTimeout(b.Context(), benchSetupTimeout)
	defer cancel()
	leader := c.WaitLeader(ctx)
	start := time.Now()
	f := startSimFleet(ctx, b, c, nodes, func(cfg *simagent.Config) { cfg.SpreadHeartbeats = true })
	waitFleetReady(ctx, b, f)
	b.Logf("%d nodes registered and ready in %s", nodes, time.Since(start).Round(time.Millisecond))

	var rate, cores, entries float64
	b.ResetTimer()
	for range b.N {
		s0 := sampleLeader(ctx, b, leader, f)
		pause(ctx, b, window)
		s1 := sampleLeader(ctx, b, leader, f)
		wall := s1.at.Sub(s0.at).Seconds()
		rate += float64(s1.heartbeats-s0.heartbeats) / wall
		cores += (s1.cpu - s0.cpu).Seconds() / wall
		entries += float64(s1.index - s0.index)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(rate/n, "heartbeats/s")
	b.ReportMetric(cores/n, "leader-cpu-cores")
	b.ReportMetric(entries/n, "raft-entries")
	b.ReportMetric(float64(procRSS(b, leader.Pid()))/(1<<20), "leader-rss-MB")
	b.ReportMetric(float64(procRSS(b, os.Getpid()))/(1<<20), "fleet-rss-MB")
	if st := f.Stats(); st.HeartbeatsFailed > 0 || st.NodeStatuses[droverv1.NodeStatus_NODE_STATUS_READY] != nodes {
		b.Fatalf("fleet: %d heartbeats failed, statuses %v", st.HeartbeatsFailed, st.NodeStatuses)
	}
}

func benchMaxHeartbeats(b *testing.B, nodes, senders int, window time.Duration) {
	requireProc(b)
	// The harness's 1h minimum TTL: no node expires while the senders
	// cycle through them, whatever rate they reach.
	c := cluster.New(b, droverBin, 1, cluster.Bootstrap())
	ctx, cancel := context.WithTimeout(b.Context(), benchSetupTimeout)
	defer cancel()
	leader := c.WaitLeader(ctx)
	f := startSimFleet(ctx, b, c, nodes)
	waitFleetReady(ctx, b, f)
	client := droverv1.NewNodeServiceClient(leader.Conn())

	var rate, cores, clientCores float64
	var latencies []time.Duration
	b.ResetTimer()
	for range b.N {
		self0, s0 := procCPU(b, os.Getpid()), sampleLeader(ctx, b, leader, f)
		sent, lat := hammerHeartbeats(ctx, b, client, f, senders, window)
		self1, s1 := procCPU(b, os.Getpid()), sampleLeader(ctx, b, leader, f)
		wall := s1.at.Sub(s0.at).Seconds()
		rate += float64(sent) / wall
		cores += (s1.cpu - s0.cpu).Seconds() / wall
		clientCores += (self1 - self0).Seconds() / wall
		latencies = append(latencies, lat...)
		if s1.index != s0.index {
			b.Errorf("heartbeats wrote %d raft entries", s1.index-s0.index)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(rate/n, "heartbeats/s")
	b.ReportMetric(cores/n, "leader-cpu-cores")
	b.ReportMetric(clientCores/n, "client-cpu-cores")
	reportLatencies(b, latencies)
}

// hammerHeartbeats sends heartbeats of the fleet's nodes from senders
// goroutines for window and returns how many were accepted and a sample of
// their latencies. Any failure fails the benchmark.
func hammerHeartbeats(ctx context.Context, b *testing.B, client droverv1.NodeServiceClient, f *simagent.Fleet, senders int, window time.Duration) (uint64, []time.Duration) {
	agents := f.Agents()
	// Calls in flight at the end of the window finish; none starts after.
	end := time.Now().Add(window)
	var (
		sent atomic.Uint64
		wg   sync.WaitGroup
		mu   sync.Mutex
		lat  []time.Duration
		errs = make(chan error, senders)
	)
	for g := range senders {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for i := g; time.Now().Before(end); i += senders {
				n := agents[i%len(agents)].Node()
				t0 := time.Now()
				_, err := client.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{
					NodeId: n.ID, SecretId: n.Secret, Status: droverv1.NodeStatus_NODE_STATUS_READY,
				})
				if err != nil {
					errs <- fmt.Errorf("heartbeat of node %s: %w", n.ID, err)
					return
				}
				if sent.Add(1)%16 == 0 {
					mine = append(mine, time.Since(t0))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return sent.Load(), lat
}

// BenchmarkFailover10k kills the leader of a 3-server cluster under 10,000
// heartbeat-only simulated nodes and measures, from the kill: the time
// until the survivors agree on a new leader, and the times until half, 99%
// and all of the nodes have had a heartbeat sent after the kill accepted
// (by the new leader). No node may be marked (watched on a survivor's event
// stream) or written after the fleet was ready (read from the new leader).
// The TTL policy keeps every node's TTL at 10-20s (minimum 10s,
// 1,000 heartbeats per second; with the default 50 per second 10,000 nodes
// get 200-400s and the last node's heartbeat is due up to 6 minutes after
// the kill). Each op is one failover; the killed server is restarted
// between ops, outside the timer.
//
//	go test -run '^$' -bench 'Failover10k' -benchtime 1x -count 3 -timeout 60m ./test/
func BenchmarkFailover10k(b *testing.B) {
	const nodes = 10000
	c := cluster.New(b, droverBin, 3, cluster.Args("-heartbeat-min-ttl", "10s", "-heartbeat-max-per-second", "1000"))
	ctx, cancel := context.WithTimeout(b.Context(), benchSetupTimeout)
	defer cancel()
	c.WaitLeader(ctx)
	f := startSimFleet(ctx, b, c, nodes, func(cfg *simagent.Config) { cfg.SpreadHeartbeats = true })
	waitFleetReady(ctx, b, f)
	// Heartbeats write nothing: no node is written after this, failovers
	// included.
	readyIndex := lastIndex(ctx, b, c.WaitLeader(ctx))
	ids := fleetIDs(f)

	var elected, half, most, all []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		leader := c.WaitLeader(ctx)
		c.WaitConverged(ctx)
		marks := watchMarks(ctx, b, c.Others(leader)[0], lastIndex(ctx, b, leader)+1)
		b.StartTimer()
		killed := time.Now()
		leader.Kill()
		newLeader := c.WaitLeader(ctx, c.Others(leader)...)
		elected = append(elected, time.Since(killed))
		h, m, a := waitFailedOver(ctx, b, f, killed)
		b.StopTimer()
		half, most, all = append(half, h), append(most, m), append(all, a)
		marks.close()
		if err := marks.failure(); err != nil {
			b.Fatalf("watching for marks during the failover: %v", err)
		}
		if bad := marks.of(ids); len(bad) > 0 {
			b.Fatalf("%d nodes marked during the failover, e.g. %s", len(bad), bad[0])
		}
		requireUntouched(ctx, b, newLeader, f, readyIndex)
		leader.Restart()
	}
	b.ReportMetric(median(elected).Seconds(), "elected-s")
	b.ReportMetric(median(half).Seconds(), "p50-nodes-s")
	b.ReportMetric(median(most).Seconds(), "p99-nodes-s")
	b.ReportMetric(median(all).Seconds(), "all-nodes-s")
}

// waitFailedOver polls until every agent has had a heartbeat sent after
// since accepted, and returns when half, 99% and all of them had.
func waitFailedOver(ctx context.Context, b *testing.B, f *simagent.Fleet, since time.Time) (half, most, all time.Duration) {
	n := len(f.Agents())
	for {
		done, took := f.HeartbeatedSince(since), time.Since(since)
		if half == 0 && 2*done >= n {
			half = took
		}
		if most == 0 && 100*done >= 99*n {
			most = took
		}
		if done == n {
			return half, most, took
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d nodes heartbeated the new leader within %s", done, n, took)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// leaderSample is what a benchmark reads at the edges of its window.
type leaderSample struct {
	at         time.Time
	heartbeats uint64
	cpu        time.Duration
	index      uint64
}

func sampleLeader(ctx context.Context, b *testing.B, leader *cluster.Server, f *simagent.Fleet) leaderSample {
	b.Helper()
	return leaderSample{
		at:         time.Now(),
		heartbeats: f.Stats().HeartbeatsOK,
		cpu:        procCPU(b, leader.Pid()),
		index:      lastIndex(ctx, b, leader),
	}
}

// pause waits for d; the benchmark's measuring window.
func pause(ctx context.Context, b *testing.B, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
		b.Fatalf("deadline within a %s window", d)
	}
}

// requireProc skips benchmarks that read process statistics where there is
// no /proc.
func requireProc(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("needs /proc to read the leader's CPU time")
	}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times on Linux.
const clockTicks = 100

// procCPU returns the user plus system CPU time process pid has used.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("CPU time of process %d: %v", pid, err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		b.Fatalf("CPU time of process %d: short stat %q", pid, s)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("CPU time of process %d: %v", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// procRSS returns process pid's resident memory in bytes.
func procRSS(b *testing.B, pid int) int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("memory of process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("memory of process %d: %q: %v", pid, line, err)
			}
			return kb << 10
		}
	}
	b.Fatalf("memory of process %d: no VmRSS", pid)
	return 0
}
