package test_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// Heartbeat settings of TestLeaderFailoverKeepsNodes: TTLs of 2-4s, so that
// a test run sees many of them, and a failover TTL long enough for 2,000
// nodes to find the new leader on a busy 2-core machine.
const (
	failoverMinTTL      = 2 * time.Second
	failoverMaxTTL      = 2 * failoverMinTTL // the TTL's random stagger at most doubles it
	failoverGrace       = 2 * time.Second
	failoverTTL         = 15 * time.Second
	failoverFleetSize   = 2000
	failoverProbeNodes  = 5
	failoverMarkSlack   = 6 * time.Second
	failoverTestTimeout = 2 * time.Minute
)

// failoverArgs override the harness's default of a 1h TTL.
func failoverArgs() cluster.Option {
	return cluster.Args("-heartbeat-min-ttl", failoverMinTTL.String(), "-heartbeat-grace", failoverGrace.String(),
		"-heartbeat-max-per-second", "5000", "-failover-heartbeat-ttl", failoverTTL.String())
}

// TestLeaderFailoverKeepsNodes runs 2,000 heartbeat-only simulated nodes
// against a 3-server cluster and kills the leader with SIGKILL. Steady
// heartbeats must write nothing to raft, before and after the failover; no
// node may be marked down or disconnected while the fleet finds the new
// leader (watched on the event stream past the failover TTL, and checked in
// the final state: no node was written after it became ready). So that the
// test is not vacuous, a few probe nodes stop heartbeating after the
// failover and must be marked down by the new leader within ttl + grace.
func TestLeaderFailoverKeepsNodes(t *testing.T) {
	c := cluster.New(t, droverBin, 3, failoverArgs())
	ctx := within(t, testContext(t), failoverTestTimeout)
	leader := c.WaitLeader(ctx)
	fleet := startSimFleet(ctx, t, c, failoverFleetSize)
	probes := startSimFleet(ctx, t, c, failoverProbeNodes)
	waitFleetReady(ctx, t, fleet)
	waitFleetReady(ctx, t, probes)

	// (a) Steady heartbeats write nothing.
	readyIndex := lastIndex(ctx, t, leader)
	watcher := c.Others(leader)[0]
	marks := watchMarks(ctx, t, watcher, readyIndex+1)
	requireQuiet(ctx, t, leader, fleet, 2*failoverMaxTTL)

	// (b) Kill the leader; the fleet fails over without a node marked.
	killed := time.Now()
	leader.Kill()
	newLeader := c.WaitLeader(ctx, c.Others(leader)...)
	waitHeartbeatedSince(ctx, t, killed, fleet, probes)
	t.Logf("every node heartbeated new leader %s %s after the kill", newLeader, time.Since(killed).Round(time.Millisecond))

	// (c) Steady heartbeats write nothing on the new leader either.
	requireQuiet(ctx, t, newLeader, fleet, 2*failoverMaxTTL)

	// The negative check: probes that stop heartbeating are marked down.
	probes.Stop()
	stopped := time.Now()
	deadline := stopped.Add(failoverMaxTTL + failoverGrace + failoverMarkSlack)
	probeIDs := fleetIDs(probes)
	poll(within(t, ctx, time.Until(deadline)), t, "probe nodes marked down", func() (bool, string) {
		down := marks.downOf(probeIDs)
		return down == len(probeIDs), fmt.Sprintf("%d of %d probes marked down", down, len(probeIDs))
	})
	t.Logf("probes marked down %s after they stopped", time.Since(stopped).Round(time.Millisecond))

	// Keep watching until the failover timers of any node that never
	// reached the new leader would have fired, plus two TTLs and the grace.
	watchEnd := killed.Add(failoverTTL + 2*failoverMaxTTL + failoverGrace)
	select {
	case <-time.After(time.Until(watchEnd)):
	case <-ctx.Done():
		t.Fatal("test deadline before the end of the watch window")
	}
	if err := marks.failure(); err != nil {
		t.Fatal(err)
	}
	if bad := marks.of(fleetIDs(fleet)); len(bad) > 0 {
		t.Fatalf("%d fleet nodes marked after the fleet was ready, e.g. %s", len(bad), bad[0])
	}
	requireUntouched(ctx, t, newLeader, fleet, readyIndex)
	if st := fleet.Stats(); st.NodeStatuses[droverv1.NodeStatus_NODE_STATUS_READY] != failoverFleetSize {
		t.Fatalf("agents' statuses %v, want all %d ready", st.NodeStatuses, failoverFleetSize)
	} else {
		t.Logf("fleet: %d heartbeats sent, %d failed, %d failovers", st.HeartbeatsSent, st.HeartbeatsFailed, st.Failovers)
	}
}

// startSimFleet runs n heartbeat-only simulated nodes against every server
// of c until the test ends. Options adjust the fleet's configuration.
func startSimFleet(ctx context.Context, t testing.TB, c *cluster.Cluster, n int, opts ...func(*simagent.Config)) *simagent.Fleet {
	t.Helper()
	cfg := simagent.Config{Nodes: simagent.DefaultTemplate().Nodes(n), HeartbeatOnly: true}
	for _, s := range c.Servers() {
		cfg.Servers = append(cfg.Servers, s.RPCAddr())
	}
	for _, o := range opts {
		o(&cfg)
	}
	f, err := simagent.NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// waitFleetReady waits until the servers have told every agent of f that
// its node is ready.
func waitFleetReady(ctx context.Context, t testing.TB, f *simagent.Fleet) {
	t.Helper()
	n := len(f.Agents())
	poll(ctx, t, fmt.Sprintf("%d simulated nodes ready", n), func() (bool, string) {
		st := f.Stats()
		return st.NodeStatuses[droverv1.NodeStatus_NODE_STATUS_READY] == n, fmt.Sprintf("statuses %v", st.NodeStatuses)
	})
}

// waitHeartbeatedSince waits until every agent of the fleets has had a
// heartbeat sent at or after t accepted.
func waitHeartbeatedSince(ctx context.Context, t testing.TB, since time.Time, fleets ...*simagent.Fleet) {
	t.Helper()
	poll(ctx, t, "every node heartbeated since "+since.Format(time.StampMilli), func() (bool, string) {
		done, all := 0, 0
		for _, f := range fleets {
			done += f.HeartbeatedSince(since)
			all += len(f.Agents())
		}
		return done == all, fmt.Sprintf("%d of %d", done, all)
	})
}

// lastIndex returns the last index of s's raft log.
func lastIndex(ctx context.Context, t testing.TB, s *cluster.Server) uint64 {
	t.Helper()
	info, err := serverInfo(ctx, s)
	if err != nil {
		t.Fatalf("info of %s: %v", s, err)
	}
	return info.GetLastIndex()
}

// requireQuiet fails the test unless the leader's raft log stays the same
// for at least span while every node of the fleet heartbeats at least
// twice.
func requireQuiet(ctx context.Context, t testing.TB, leader *cluster.Server, f *simagent.Fleet, span time.Duration) {
	t.Helper()
	before, start := lastIndex(ctx, t, leader), time.Now()
	waitHeartbeatedSince(ctx, t, start, f)
	mid := time.Now()
	waitHeartbeatedSince(ctx, t, mid, f)
	select {
	case <-time.After(time.Until(start.Add(span))):
	case <-ctx.Done():
		t.Fatalf("deadline while watching the raft log of %s", leader)
	}
	if after := lastIndex(ctx, t, leader); after != before {
		t.Fatalf("steady heartbeats for %s moved the raft log of %s from %d to %d",
			time.Since(start).Round(time.Millisecond), leader, before, after)
	}
	t.Logf("raft log of %s stayed at %d while every node heartbeated twice (%s)", leader, before, time.Since(start).Round(time.Millisecond))
}

// requireUntouched fails the test unless every fleet node is ready on s
// and none was written after index.
func requireUntouched(ctx context.Context, t testing.TB, s *cluster.Server, f *simagent.Fleet, index uint64) {
	t.Helper()
	nodes := make(map[string]*droverv1.Node)
	client := droverv1.NewNodeServiceClient(s.Conn())
	token := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := client.List(cctx, &droverv1.ListNodesRequest{Page: &droverv1.PageOptions{NextToken: token, PageSize: 1000}})
		cancel()
		if err != nil {
			t.Fatalf("list nodes on %s: %v", s, err)
		}
		for _, n := range resp.GetNodes() {
			nodes[n.GetId()] = n
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	bad := 0
	for _, id := range fleetIDs(f) {
		n := nodes[id]
		if n.GetStatus() != droverv1.NodeStatus_NODE_STATUS_READY || n.GetModifyIndex() > index {
			if bad++; bad <= 10 {
				t.Errorf("node %s is %s, last written at %d (ready at %d): events %v", id, n.GetStatus(), n.GetModifyIndex(), index, n.GetEvents())
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d nodes were marked or written after they were ready", bad, len(f.Agents()))
	}
}

func fleetIDs(f *simagent.Fleet) []string {
	ids := make([]string, 0, len(f.Agents()))
	for _, a := range f.Agents() {
		ids = append(ids, a.Node().ID)
	}
	return ids
}

// markWatch records the nodes an event stream shows turning down or
// disconnected.
type markWatch struct {
	entries *entryFollower

	mu     sync.Mutex
	marked map[string]mark
}

// mark is one node turning down or disconnected.
type mark struct {
	status droverv1.NodeStatus
	index  uint64
}

// watchMarks streams node events from s, starting at index from, until
// close or the end of the test.
func watchMarks(ctx context.Context, t testing.TB, s *cluster.Server, from uint64) *markWatch {
	t.Helper()
	w := &markWatch{marked: make(map[string]mark)}
	w.entries = followEntries(ctx, s.Conn(), from, []droverv1.Topic{droverv1.Topic_TOPIC_NODE}, func(resp *droverv1.StreamEventsResponse) {
		for _, ev := range resp.GetEvents() {
			st := ev.GetNode().GetStatus()
			if ev.GetType() == "NodeStatusUpdated" && st.IsUnresponsive() {
				w.mu.Lock()
				w.marked[ev.GetKey()] = mark{status: st, index: ev.GetIndex()}
				w.mu.Unlock()
			}
		}
	})
	t.Cleanup(w.close)
	return w
}

// close ends the stream and waits for its goroutine.
func (w *markWatch) close() { w.entries.stop() }

// failure returns the first problem of the stream itself.
func (w *markWatch) failure() error { return w.entries.failure() }

// of describes the marks of the given nodes.
func (w *markWatch) of(ids []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, id := range ids {
		if m, ok := w.marked[id]; ok {
			out = append(out, fmt.Sprintf("node %s %s at index %d", id, m.status, m.index))
		}
	}
	return out
}

// downOf counts the given nodes marked down.
func (w *markWatch) downOf(ids []string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, id := range ids {
		if w.marked[id].status == droverv1.NodeStatus_NODE_STATUS_DOWN {
			n++
		}
	}
	return n
}
