package autopilot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftautopilot "github.com/hashicorp/raft-autopilot"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/version"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// peerVersion is what the fake Info answers report, distinct from the local
// binary's version so tests can tell where a version came from.
const peerVersion = "0.0.9"

// waitTimeout bounds every wait for an observable condition.
const waitTimeout = 20 * time.Second

// nopFSM is the smallest raft.FSM: these tests only need raft's log and
// configuration, not an application state.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                    { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error)    { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error         { return rc.Close() }
func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

type nopSnapshot struct{}

type testNode struct {
	id      raft.ServerID
	addr    raft.ServerAddress
	rpcAddr string
	trans   *raft.InmemTransport
	raft    *raft.Raft
}

// testCluster is a real raft cluster on in-memory transports plus a fake of
// the server's side of the autopilot: the member records, the Info RPC and
// the record removal.
type testCluster struct {
	t     *testing.T
	mu    sync.Mutex
	nodes []*testNode
	// fail decides, per RPC address and call number (from 1), whether an
	// Info call fails.
	fail    map[string]func(call int) bool
	calls   map[string]int
	removed []string
}

func raftConfigFor(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	// Fast but not so fast that the race detector causes elections.
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.Logger = hclog.NewNullLogger()
	return c
}

// newTestCluster starts voters raft servers bootstrapped with the same
// configuration and waits for a leader.
func newTestCluster(t *testing.T, voters int) *testCluster {
	t.Helper()
	c := &testCluster{t: t, fail: map[string]func(int) bool{}, calls: map[string]int{}}
	for i := 0; i < voters; i++ {
		c.newNode()
	}
	var conf raft.Configuration
	for _, n := range c.nodes {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: n.id, Address: n.addr})
	}
	for _, n := range c.nodes {
		c.startRaft(n, &conf)
	}
	c.leader()
	return c
}

// newNode creates a node with a transport connected to every other node, but
// no raft yet.
func (c *testCluster) newNode() *testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.nodes)
	addr, trans := raft.NewInmemTransport("")
	n := &testNode{id: raft.ServerID(fmt.Sprintf("node%d", i)), addr: addr, rpcAddr: fmt.Sprintf("rpc-%d:4647", i), trans: trans}
	for _, o := range c.nodes {
		o.trans.Connect(n.addr, n.trans)
		n.trans.Connect(o.addr, o.trans)
	}
	c.nodes = append(c.nodes, n)
	return n
}

// startRaft starts n's raft, bootstrapping it with conf when not nil.
func (c *testCluster) startRaft(n *testNode, conf *raft.Configuration) {
	c.t.Helper()
	rc := raftConfigFor(n.id)
	logs, stable, snaps := raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	if conf != nil {
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, n.trans, *conf); err != nil {
			c.t.Fatalf("bootstrap %s: %v", n.id, err)
		}
	}
	r, err := raft.NewRaft(rc, nopFSM{}, logs, stable, snaps, n.trans)
	if err != nil {
		c.t.Fatalf("start raft %s: %v", n.id, err)
	}
	c.mu.Lock()
	n.raft = r
	c.mu.Unlock()
	c.t.Cleanup(func() { _ = r.Shutdown().Error() })
}

func (c *testCluster) leader() *testNode {
	c.t.Helper()
	var leader *testNode
	waitFor(c.t, "a raft leader", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			if n.raft != nil && n.raft.State() == raft.Leader {
				leader = n
				return true, ""
			}
		}
		return false, "no leader"
	})
	return leader
}

// followers returns the voters other than leader, sorted by id.
func (c *testCluster) followers(leader *testNode) []*testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*testNode
	for _, n := range c.nodes {
		if n != leader && n.raft != nil {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *testNode) int { return cmpString(string(a.id), string(b.id)) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (c *testCluster) setFail(n *testNode, f func(call int) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[n.rpcAddr] = f
}

func (c *testCluster) callCount(n *testNode) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[n.rpcAddr]
}

func (c *testCluster) removedRecords() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.removed)
}

// members is the fake of the replicated server records: every node ever
// created, whether or not it is in raft.
func (c *testCluster) members() []*droverv1.ServerMember {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*droverv1.ServerMember
	for _, n := range c.nodes {
		out = append(out, &droverv1.ServerMember{Id: string(n.id), RpcAddr: n.rpcAddr, RaftAddr: string(n.addr), Version: "0.0.1"})
	}
	return out
}

// fetchInfo is the fake Info RPC: it describes the node from its real raft.
func (c *testCluster) fetchInfo(ctx context.Context, rpcAddr string) (*droverv1.ServerInfoResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.calls[rpcAddr]++
	call := c.calls[rpcAddr]
	fail := c.fail[rpcAddr]
	var node *testNode
	for _, n := range c.nodes {
		if n.rpcAddr == rpcAddr {
			node = n
		}
	}
	c.mu.Unlock()
	if fail != nil && fail(call) {
		return nil, errors.New("injected: connection refused")
	}
	if node == nil || node.raft == nil {
		return nil, fmt.Errorf("no server at %s", rpcAddr)
	}
	r := node.raft
	stats := r.Stats()
	term, _ := strconv.ParseUint(stats["last_log_term"], 10, 64)
	contact := int64(-1)
	if d, err := time.ParseDuration(stats["last_contact"]); err == nil {
		contact = int64(d)
	}
	_, leaderID := r.LeaderWithID()
	return &droverv1.ServerInfoResponse{
		Server:       &droverv1.ServerMember{Id: string(node.id), RpcAddr: node.rpcAddr, RaftAddr: string(node.addr), Version: peerVersion},
		HasState:     true,
		RaftState:    RaftState(r.State()),
		LeaderId:     string(leaderID),
		LastIndex:    r.LastIndex(),
		LastTerm:     term,
		AppliedIndex: r.AppliedIndex(),
		LastContact:  durationpb.New(time.Duration(contact)),
	}, nil
}

func (c *testCluster) removeRecord(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = append(c.removed, id)
	return ctx.Err()
}

// newAutopilot builds an autopilot for node n with fast intervals; tweak
// adjusts the config. It is stopped when the test ends.
func (c *testCluster) newAutopilot(n *testNode, tweak func(*Config)) *Autopilot {
	cfg := Config{
		Raft:                 n.raft,
		LocalID:              string(n.id),
		Logger:               testLogger(c.t),
		Members:              c.members,
		FetchInfo:            c.fetchInfo,
		RemoveRecord:         c.removeRecord,
		CleanupDeadServers:   true,
		LastContactThreshold: time.Second, // generous: -race slows heartbeats
		UpdateInterval:       50 * time.Millisecond,
		ReconcileInterval:    50 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	a := New(cfg)
	c.t.Cleanup(a.Stop)
	return a
}

// testLogger logs through t until the test's cleanups run, so a straggling
// goroutine cannot log into a finished test.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close) // registered first, so it runs after every later cleanup
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(string(p[:len(p)-1]))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

// waitFor polls cond until it holds, failing the test after waitTimeout with
// the last reason cond gave.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var why string
	for {
		var ok bool
		if ok, why = cond(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, why)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronization
	}
}

// healthyVoters is a waitFor condition: Members reports exactly the given
// voters, all healthy, and the cluster healthy with the failure tolerance.
func healthyVoters(a *Autopilot, ids []raft.ServerID, ft int32) func() (bool, string) {
	return func() (bool, string) {
		m := a.Members()
		if len(m.GetServers()) != len(ids) {
			return false, fmt.Sprintf("%d servers: %v", len(m.GetServers()), m)
		}
		for _, s := range m.GetServers() {
			if !slices.Contains(ids, raft.ServerID(s.GetId())) || !s.GetVoter() || !s.GetHealthy() {
				return false, fmt.Sprintf("server %v", s)
			}
		}
		if !m.GetHealthy() || m.GetFailureTolerance() != ft {
			return false, fmt.Sprintf("cluster healthy %t ft %d", m.GetHealthy(), m.GetFailureTolerance())
		}
		return true, ""
	}
}

func ids(nodes ...*testNode) []raft.ServerID {
	var out []raft.ServerID
	for _, n := range nodes {
		out = append(out, n.id)
	}
	return out
}

func configOf(t *testing.T, r *raft.Raft) map[raft.ServerID]raft.ServerSuffrage {
	t.Helper()
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatalf("get configuration: %v", err)
	}
	out := map[raft.ServerID]raft.ServerSuffrage{}
	for _, s := range f.Configuration().Servers {
		out[s.ID] = s.Suffrage
	}
	return out
}

func TestMembersReportsHealthyCluster(t *testing.T) {
	c := newTestCluster(t, 3)
	leader := c.leader()
	a := c.newAutopilot(leader, nil)
	a.Start(context.Background())

	all := ids(c.nodes...)
	waitFor(t, "3 healthy voters", healthyVoters(a, all, 1))

	m := a.Members()
	if m.GetLeaderId() != string(leader.id) {
		t.Errorf("leader_id = %q, want %q", m.GetLeaderId(), leader.id)
	}
	for i, s := range m.GetServers() {
		isLeader := s.GetId() == string(leader.id)
		if isLeader != (i == 0) || s.GetLeader() != isLeader {
			t.Errorf("server %d %s: leader %t, want the leader first", i, s.GetId(), s.GetLeader())
		}
		wantVersion, wantState := peerVersion, droverv1.RaftState_RAFT_STATE_FOLLOWER
		if isLeader {
			wantVersion, wantState = version.Version, droverv1.RaftState_RAFT_STATE_LEADER
		}
		if s.GetVersion() != wantVersion || s.GetRaftState() != wantState {
			t.Errorf("server %s: version %q state %v, want %q %v", s.GetId(), s.GetVersion(), s.GetRaftState(), wantVersion, wantState)
		}
		if s.GetRpcAddr() == "" || s.GetRaftAddr() == "" || s.GetLastIndex() == 0 || s.GetLastTerm() == 0 ||
			s.GetStableSince() == 0 || s.GetError() != "" {
			t.Errorf("server %s incomplete: %v", s.GetId(), s)
		}
	}
	last := a.LastIndexes()
	for _, id := range all {
		if last[string(id)] == 0 {
			t.Errorf("LastIndexes()[%s] = 0: %v", id, last)
		}
	}
	// The leader measures itself from raft, never over RPC.
	if n := c.callCount(leader); n != 0 {
		t.Errorf("FetchInfo called %d times for the leader itself", n)
	}

	// The library must never get the local server removed.
	d := (*delegate)(a)
	d.RemoveFailedServer(&raftautopilot.Server{ID: leader.id, Address: leader.addr})
	a.mu.Lock()
	inFlight := len(a.cur.removing)
	a.mu.Unlock()
	if inFlight != 0 {
		t.Errorf("removal of the local server started")
	}
	if _, ok := configOf(t, leader.raft)[leader.id]; !ok {
		t.Errorf("leader left the configuration")
	}
}

func TestDeadServerIsRemoved(t *testing.T) {
	const deadAfter = 500 * time.Millisecond
	c := newTestCluster(t, 3)
	leader := c.leader()
	a := c.newAutopilot(leader, func(cfg *Config) { cfg.DeadServerAfter = deadAfter })
	a.Start(context.Background())
	waitFor(t, "3 healthy voters", healthyVoters(a, ids(c.nodes...), 1))

	// flaky fails every other probe, so it keeps failing but never for
	// long; dead fails from now on. flaky has the smaller id: the library
	// removes at most one voter of three per round, in id order, so were
	// flaky wrongly counted as failed it would go first.
	fs := c.followers(leader)
	flaky, dead := fs[0], fs[1]
	c.setFail(flaky, func(call int) bool { return call%2 == 1 })
	deadSince := time.Now()
	c.setFail(dead, func(int) bool { return true })
	if err := dead.raft.Shutdown().Error(); err != nil {
		t.Fatalf("shut down %s: %v", dead.id, err)
	}

	waitFor(t, "the dead server removed from raft and its record", func() (bool, string) {
		if _, in := configOf(t, leader.raft)[dead.id]; in {
			return false, "still in the raft configuration"
		}
		if !slices.Contains(c.removedRecords(), string(dead.id)) {
			return false, fmt.Sprintf("records removed: %v", c.removedRecords())
		}
		return true, ""
	})
	if waited := time.Since(deadSince); waited < deadAfter {
		t.Errorf("removed after %s, before DeadServerAfter %s", waited, deadAfter)
	}
	if got := c.removedRecords(); !slices.Equal(got, []string{string(dead.id)}) {
		t.Errorf("records removed = %v, want just %s", got, dead.id)
	}
	conf := configOf(t, leader.raft)
	if conf[flaky.id] != raft.Voter || conf[leader.id] != raft.Voter || len(conf) != 2 {
		t.Errorf("configuration = %v, want the leader and %s as voters", conf, flaky.id)
	}

	// Once flaky answers again the cluster is healthy, with no tolerance
	// left at two voters.
	c.setFail(flaky, nil)
	waitFor(t, "2 healthy voters", healthyVoters(a, ids(leader, flaky), 0))
}

func TestFlakyServerIsNotRemoved(t *testing.T) {
	const deadAfter = 300 * time.Millisecond
	c := newTestCluster(t, 3)
	leader := c.leader()
	a := c.newAutopilot(leader, func(cfg *Config) { cfg.DeadServerAfter = deadAfter })
	a.Start(context.Background())
	waitFor(t, "3 healthy voters", healthyVoters(a, ids(c.nodes...), 1))

	// A server failing every other probe, alone (so the library would be
	// free to remove it), for many times DeadServerAfter.
	flaky := c.followers(leader)[0]
	c.setFail(flaky, func(call int) bool { return call%2 == 1 })
	start, startCalls := time.Now(), c.callCount(flaky)
	waitFor(t, "probes spanning 5×DeadServerAfter", func() (bool, string) {
		calls := c.callCount(flaky) - startCalls
		return time.Since(start) > 5*deadAfter && calls >= 20, fmt.Sprintf("%d probes", calls)
	})
	if _, in := configOf(t, leader.raft)[flaky.id]; !in {
		t.Fatalf("%s removed although it never failed for %s in a row", flaky.id, deadAfter)
	}
	if got := c.removedRecords(); len(got) != 0 {
		t.Errorf("records removed: %v", got)
	}
}

func TestNonVoterIsPromoted(t *testing.T) {
	const stabilization = 300 * time.Millisecond
	c := newTestCluster(t, 3)
	leader := c.leader()
	voters := slices.Clone(c.nodes)
	joiner := c.newNode()
	c.startRaft(joiner, nil)

	a := c.newAutopilot(leader, func(cfg *Config) { cfg.ServerStabilizationTime = stabilization })
	started := time.Now()
	a.Start(context.Background())
	// The library waives the stabilization time while it has been running
	// for less than that time; wait it out so the promotion below has to
	// honour it.
	waitFor(t, "3 healthy voters, running past the stabilization time", func() (bool, string) {
		if ok, why := healthyVoters(a, ids(voters...), 1)(); !ok {
			return false, why
		}
		return time.Since(started) > 2*stabilization, "running for " + time.Since(started).String()
	})

	added := time.Now()
	if err := leader.raft.AddNonvoter(joiner.id, joiner.addr, 0, 0).Error(); err != nil {
		t.Fatalf("add non-voter: %v", err)
	}
	waitFor(t, "the non-voter promoted", func() (bool, string) {
		s := configOf(t, leader.raft)[joiner.id]
		return s == raft.Voter, "suffrage " + s.String()
	})
	if waited := time.Since(added); waited < stabilization {
		t.Errorf("promoted after %s, before the stabilization time %s", waited, stabilization)
	}
	waitFor(t, "4 healthy voters", healthyVoters(a, ids(c.nodes...), 1))
}

func TestStopStart(t *testing.T) {
	c := newTestCluster(t, 3)
	leader := c.leader()
	a := c.newAutopilot(leader, nil)
	all := ids(c.nodes...)

	// Stop before any Start, and twice, is harmless.
	a.Stop()
	a.Stop()

	a.Start(context.Background())
	a.Start(context.Background()) // already running: no-op
	waitFor(t, "3 healthy voters", healthyVoters(a, all, 1))

	begin := time.Now()
	a.Stop()
	if d := time.Since(begin); d > time.Second {
		t.Errorf("Stop took %s", d)
	}
	m := a.Members()
	if m.GetHealthy() || len(m.GetServers()) != 3 {
		t.Errorf("after Stop: healthy %t with %d servers, want unhealthy with 3", m.GetHealthy(), len(m.GetServers()))
	}
	for _, s := range m.GetServers() {
		if s.GetHealthy() {
			t.Errorf("after Stop: %s still healthy", s.GetId())
		}
	}
	if got := a.LastIndexes(); len(got) != 0 {
		t.Errorf("after Stop: LastIndexes = %v", got)
	}
	a.Stop()

	a.Start(context.Background())
	waitFor(t, "3 healthy voters after a restart", healthyVoters(a, all, 1))

	// A run whose context is cancelled is replaced by the next Start.
	a.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	a.Start(ctx)
	waitFor(t, "3 healthy voters", healthyVoters(a, all, 1))
	cancel()
	a.Start(context.Background())
	waitFor(t, "3 healthy voters after a cancelled run", healthyVoters(a, all, 1))
}
