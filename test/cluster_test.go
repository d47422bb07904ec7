package test_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestClusterFormsFromFlags starts three servers that know each other only
// through -bootstrap-expect 3 and -join, and checks that they form one
// healthy cluster of three voters.
func TestClusterFormsFromFlags(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	c.WaitLeader(ctx)
	c.WaitHealthy(ctx, 3)

	for _, s := range c.Servers() {
		info, err := serverInfo(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !info.GetHasState() || info.GetBootstrapExpect() != 3 || info.GetServer().GetId() != s.ID() ||
			info.GetServer().GetRpcAddr() != s.RPCAddr() || info.GetServer().GetRaftAddr() != s.RaftAddr() {
			t.Errorf("%s describes itself as %v", s, info)
		}
		// Every server answers with the leader's view of the peers.
		peers, err := droverv1.NewOperatorServiceClient(s.Conn()).RaftListPeers(ctx, &droverv1.RaftListPeersRequest{})
		if err != nil {
			t.Fatalf("list peers through %s: %v", s, err)
		}
		checkPeers(t, fmt.Sprintf("peers listed through %s", s), peers, c.Servers())
	}
}

// checkPeers checks that peers are exactly want, all voters, with their
// addresses, and exactly one of them the leader.
func checkPeers(t *testing.T, what string, peers *droverv1.RaftListPeersResponse, want []*cluster.Server) {
	t.Helper()
	got := map[string]*droverv1.RaftPeer{}
	leaders := 0
	for _, p := range peers.GetPeers() {
		got[p.GetId()] = p
		if p.GetLeader() {
			leaders++
		}
	}
	if len(got) != len(want) || len(peers.GetPeers()) != len(want) || leaders != 1 {
		t.Errorf("%s: %v, want %d peers, one of them the leader", what, peers.GetPeers(), len(want))
	}
	for _, s := range want {
		p, ok := got[s.ID()]
		switch {
		case !ok:
			t.Errorf("%s: %s missing from %v", what, s, peers.GetPeers())
		case p.GetAddress() != s.RaftAddr() || p.GetRpcAddr() != s.RPCAddr() || !p.GetVoter():
			t.Errorf("%s: %v, want raft %s rpc %s voter", what, p, s.RaftAddr(), s.RPCAddr())
		}
	}
}

// TestWritesOnAnyServer writes through every server (followers forward to
// the leader) and reads the writes back through another server.
func TestWritesOnAnyServer(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	c.WaitLeader(ctx)
	servers := c.Servers()

	var nodes []*droverv1.Node
	for i, s := range servers {
		other := servers[(i+1)%len(servers)]

		n := mock.Node()
		reg, err := registerNode(ctx, s.Conn(), n)
		if err != nil {
			t.Fatalf("register a node through %s: %v", s, err)
		}
		if reg.GetIndex() == 0 || reg.GetStatus() != droverv1.NodeStatus_NODE_STATUS_INITIALIZING {
			t.Errorf("register a node through %s: %v", s, reg)
		}
		nodes = append(nodes, n)

		j := mock.Job(1)
		jr, err := registerJob(ctx, s.Conn(), j, uuid.NewString())
		if err != nil {
			t.Fatalf("register a job through %s: %v", s, err)
		}
		// A read that does not allow stale answers sees every write
		// acknowledged before it, whichever server it is sent to.
		got, err := droverv1.NewJobServiceClient(other.Conn()).Get(ctx, &droverv1.GetJobRequest{JobId: j.GetId()})
		if err != nil {
			t.Fatalf("job %s written through %s, read through %s: %v", j.GetId(), s, other, err)
		}
		if got.GetJob().GetId() != j.GetId() || got.GetMeta().GetIndex() < jr.GetIndex() || !got.GetMeta().GetKnownLeader() {
			t.Errorf("job written through %s at index %d, read through %s: %v", s, jr.GetIndex(), other, got)
		}
	}
	c.WaitConverged(ctx, servers...)
	requireNodes(ctx, t, servers, nodes)
}

// ack is one acknowledged write of TestLeaderKilledUnderWrites.
type ack struct {
	node   *droverv1.Node
	server string
}

// TestLeaderKilledUnderWrites kills the leader with SIGKILL while writers
// register nodes through every server, and checks that no acknowledged
// write is lost: every survivor, and the killed server once restarted,
// holds every node whose registration was acknowledged.
func TestLeaderKilledUnderWrites(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	servers := c.Servers()

	const writers = 4
	var (
		mu          sync.Mutex
		acks        []ack
		ackedVia    = map[string]int{}
		unavailable atomic.Int64
		unexpected  []string
	)
	stop := make(chan struct{})
	writeCtx, cancelWrites := context.WithCancel(ctx)
	defer cancelWrites()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			next := w
			for {
				n := mock.Node()
			retry:
				for { // until this node is acknowledged, or refused for good
					select {
					case <-stop:
						return
					default:
					}
					s := servers[next%len(servers)]
					next++
					_, err := registerNode(writeCtx, s.Conn(), n)
					switch {
					case err == nil:
						mu.Lock()
						acks = append(acks, ack{node: n, server: s.ID()})
						ackedVia[s.ID()]++
						mu.Unlock()
					case writeCtx.Err() != nil:
						return
					case status.Code(err) == codes.Unavailable:
						unavailable.Add(1)
						time.Sleep(retryPause) // backoff before retrying the same node elsewhere
						continue
					default:
						mu.Lock()
						unexpected = append(unexpected, fmt.Sprintf("register node %s through %s: %v (code %s)", n.GetId(), s, err, status.Code(err)))
						mu.Unlock()
					}
					break retry
				}
			}
		})
	}
	stopWriters := func() {
		close(stop)
		wg.Wait()
	}
	counts := func() (int, map[string]int) {
		mu.Lock()
		defer mu.Unlock()
		return len(acks), copyCounts(ackedVia)
	}

	poll(within(t, ctx, 30*time.Second), t, "100 writes acknowledged before the kill", func() (bool, string) {
		n, _ := counts()
		return n >= 100, fmt.Sprintf("%d acknowledged", n)
	})
	leader.Kill()
	survivors := c.Others(leader)
	newLeader := c.WaitLeader(ctx, survivors...)
	_, before := counts()
	// The new leader has acknowledged writes sent to it and forwarded to it.
	poll(within(t, ctx, 30*time.Second), t, "writes acknowledged through every survivor after the election", func() (bool, string) {
		_, now := counts()
		for _, s := range survivors {
			if now[s.ID()]-before[s.ID()] < 20 {
				return false, fmt.Sprintf("acknowledged through each server before %v, now %v", before, now)
			}
		}
		return true, ""
	})
	stopWriters()
	mu.Lock()
	for _, u := range unexpected {
		t.Errorf("writer: %s", u)
	}
	var nodes []*droverv1.Node
	for _, a := range acks {
		nodes = append(nodes, a.node)
	}
	t.Logf("%d writes acknowledged (%v), %d Unavailable answers retried; new leader %s", len(acks), ackedVia, unavailable.Load(), newLeader)
	mu.Unlock()

	c.WaitConverged(ctx, survivors...)
	requireNodes(ctx, t, survivors, nodes)

	leader.Restart()
	c.WaitConverged(ctx, servers...)
	requireNodes(ctx, t, []*cluster.Server{leader}, nodes)
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// installedSnapshot is hashicorp/raft's log message (raft.go,
// installSnapshot) when a follower has installed a snapshot sent by the
// leader.
const installedSnapshot = "Installed remote snapshot"

// TestWipedServerRejoinsBySnapshot stops a follower, wipes its data dir and
// restarts it after the leader has truncated its log: the follower must
// catch up through a snapshot sent by the leader.
func TestWipedServerRejoinsBySnapshot(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.Snapshots(64, time.Second, 32))
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	nodes := registerNodes(ctx, t, leader.Conn(), 300, 4)

	follower := c.Others(leader)[0]
	follower.Stop()
	follower.Wipe()
	nodes = append(nodes, registerNodes(ctx, t, leader.Conn(), 200, 4)...)
	// Once the leader has compacted its log, the entries the wiped server
	// needs, from index 1 on, are gone: only a snapshot can catch it up.
	poll(within(t, ctx, 30*time.Second), t, "leader compacted its log", func() (bool, string) {
		_, ok := leader.Logged("compacting logs")
		return ok, fmt.Sprintf("raft's %q not in %s's log", "compacting logs", leader)
	})

	follower.Restart()
	c.WaitConverged(ctx)
	if _, ok := follower.Logged(installedSnapshot); !ok {
		t.Errorf("%s caught up without logging %q: not through a snapshot", follower, installedSnapshot)
	}
	if rec, ok := leader.Logged("installing snapshot on", "peer", follower.ID()); ok {
		t.Logf("leader: %v", rec)
	}
	info, err := serverInfo(ctx, follower)
	if err != nil {
		t.Fatal(err)
	}
	if !info.GetHasState() || info.GetRaftState() != droverv1.RaftState_RAFT_STATE_FOLLOWER {
		t.Errorf("wiped server after rejoining: %v", info)
	}
	requireNodes(ctx, t, []*cluster.Server{follower}, nodes)
}

// jobWrite is a job registration and its request id.
type jobWrite struct {
	job       *droverv1.Job
	requestID string
}

func newJobWrite() jobWrite { return jobWrite{job: mock.Job(1), requestID: uuid.NewString()} }

// TestQuorumLoss runs five servers: with two killed (the leader among
// them) writes succeed; with a third killed they fail with Unavailable in
// bounded time and leave nothing half-applied; once the killed servers are
// back, every server agrees, and a client's retry of a failed write (same
// request id) applies it at most once.
func TestQuorumLoss(t *testing.T) {
	c := cluster.New(t, droverBin, 5)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	followers := c.Others(leader)

	var acked []string
	first := newJobWrite()
	retryUnavailable(within(t, ctx, 30*time.Second), t, "write with five servers", func(ctx context.Context) error {
		_, err := registerJob(ctx, leader.Conn(), first.job, first.requestID)
		return err
	})
	acked = append(acked, first.job.GetId())

	killed := []*cluster.Server{leader, followers[0]}
	for _, s := range killed {
		s.Kill()
	}
	survivors := c.Others(killed...)
	c.WaitLeader(ctx, survivors...)
	for _, s := range survivors {
		w := newJobWrite()
		retryUnavailable(within(t, ctx, 30*time.Second), t, "write through "+s.ID()+" with three of five servers", func(ctx context.Context) error {
			_, err := registerJob(ctx, s.Conn(), w.job, w.requestID)
			return err
		})
		acked = append(acked, w.job.GetId())
	}

	// Kill a follower: the leader loses its quorum and must step down.
	newLeader := c.WaitLeader(ctx, survivors...)
	third := c.Others(append(slices.Clone(killed), newLeader)...)[0]
	third.Kill()
	killed = append(killed, third)
	remaining := c.Others(killed...)

	// A write sent at once may reach a leader that has not yet noticed; it
	// cannot commit, so it must fail. Its entry may still be in a log and
	// be committed once the cluster is back: that is checked below.
	racing := newJobWrite()
	start := time.Now()
	_, err := registerJob(ctx, newLeader.Conn(), racing.job, racing.requestID)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("write through the leader %s just after losing quorum: %v (code %s) after %s, want Unavailable",
			newLeader, err, status.Code(err), time.Since(start))
	}
	t.Logf("write through the leader %s just after losing quorum: Unavailable after %s: %v", newLeader, time.Since(start).Round(time.Millisecond), err)

	poll(within(t, ctx, 30*time.Second), t, "no leader among "+fmt.Sprint(remaining), func() (bool, string) {
		var views []string
		none := true
		for _, s := range remaining {
			info, err := serverInfo(ctx, s)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", s, err)
			}
			views = append(views, fmt.Sprintf("%s: %s leader %q", s, info.GetRaftState(), info.GetLeaderId()))
			if info.GetRaftState() == droverv1.RaftState_RAFT_STATE_LEADER || info.GetLeaderId() != "" {
				none = false
			}
		}
		return none, fmt.Sprint(views)
	})

	// With no leader anywhere, a write through each remaining server (the
	// old leader and a follower) is answered Unavailable, not held until
	// the deadline, and cannot be in any log.
	fails := make([]jobWrite, len(remaining))
	var wg sync.WaitGroup
	for i, s := range remaining {
		fails[i] = newJobWrite()
		wg.Go(func() {
			start := time.Now()
			_, err := registerJob(ctx, s.Conn(), fails[i].job, fails[i].requestID)
			if status.Code(err) != codes.Unavailable {
				t.Errorf("write through %s without quorum: %v (code %s) after %s, want Unavailable", s, err, status.Code(err), time.Since(start))
				return
			}
			t.Logf("write through %s without quorum: Unavailable after %s: %v", s, time.Since(start).Round(time.Millisecond), err)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	for _, s := range killed {
		s.Restart()
	}
	c.WaitLeader(ctx)
	c.WaitConverged(ctx)
	racingKnown := 0
	for _, s := range c.Servers() {
		for _, id := range acked {
			if ok, err := jobKnown(ctx, s, id); err != nil || !ok {
				t.Errorf("acknowledged job %s on %s: known %v, %v", id, s, ok, err)
			}
		}
		for _, f := range fails {
			if ok, err := jobKnown(ctx, s, f.job.GetId()); err != nil || ok {
				t.Errorf("job %s whose write failed Unavailable with no leader is on %s: known %v, %v", f.job.GetId(), s, ok, err)
			}
		}
		ok, err := jobKnown(ctx, s, racing.job.GetId())
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			racingKnown++
		}
	}
	// WaitConverged has checked this already; say it plainly.
	if racingKnown != 0 && racingKnown != len(c.Servers()) {
		t.Fatalf("the racing write is on %d of %d servers", racingKnown, len(c.Servers()))
	}
	t.Logf("the write that raced the loss of quorum was committed after recovery: %v", racingKnown > 0)

	// The client's retry of a failed write, with the same request id,
	// applies it once; a second retry returns the first answer.
	f := fails[0]
	var applied *droverv1.RegisterJobResponse
	retryUnavailable(within(t, ctx, 30*time.Second), t, "retry of the failed write", func(ctx context.Context) error {
		var err error
		applied, err = registerJob(ctx, remaining[0].Conn(), f.job, f.requestID)
		return err
	})
	again, err := registerJob(ctx, remaining[1].Conn(), f.job, f.requestID)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetIndex() != applied.GetIndex() || again.GetEvalId() != applied.GetEvalId() || again.GetJobVersion() != applied.GetJobVersion() {
		t.Errorf("second retry with request id %s: %v, first answer %v", f.requestID, again, applied)
	}

	// The retry of the racing write writes nothing if its first attempt was
	// committed after all, and applies it otherwise.
	digest, err := droverv1.NewOperatorServiceClient(remaining[0].Conn()).StateDigest(ctx, &droverv1.StateDigestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var retried *droverv1.RegisterJobResponse
	retryUnavailable(within(t, ctx, 30*time.Second), t, "retry of the racing write", func(ctx context.Context) error {
		var err error
		retried, err = registerJob(ctx, remaining[0].Conn(), racing.job, racing.requestID)
		return err
	})
	if committed := racingKnown > 0; committed != (retried.GetIndex() <= digest.GetIndex()) {
		t.Errorf("retry of the racing write: index %d, state at %d before the retry; the first attempt was committed: %v",
			retried.GetIndex(), digest.GetIndex(), committed)
	}
	c.WaitConverged(ctx)
	for _, s := range c.Servers() {
		if ok, err := jobKnown(ctx, s, racing.job.GetId()); err != nil || !ok {
			t.Errorf("racing job %s after its retry on %s: known %v, %v", racing.job.GetId(), s, ok, err)
		}
	}
}

// TestRemoveDeadPeer removes a killed follower from the raft configuration
// and checks that the two remaining servers form a healthy cluster that
// takes writes.
func TestRemoveDeadPeer(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	c.WaitHealthy(ctx, 3)
	dead := c.Others(leader)[0]
	dead.Kill()
	survivors := c.Others(dead)

	ops := droverv1.NewOperatorServiceClient(leader.Conn())
	removed, err := ops.RaftRemovePeer(ctx, &droverv1.RaftRemovePeerRequest{Id: dead.ID()})
	if err != nil {
		t.Fatalf("remove peer %s: %v", dead, err)
	}
	if removed.GetId() != dead.ID() || removed.GetIndex() == 0 {
		t.Errorf("remove peer %s: %v", dead, removed)
	}
	for _, s := range survivors {
		peers, err := droverv1.NewOperatorServiceClient(s.Conn()).RaftListPeers(ctx, &droverv1.RaftListPeersRequest{})
		if err != nil {
			t.Fatalf("list peers through %s: %v", s, err)
		}
		checkPeers(t, fmt.Sprintf("peers listed through %s", s), peers, survivors)
		if peers.GetIndex() < removed.GetIndex() {
			t.Errorf("peers through %s at index %d, before the removal at %d", s, peers.GetIndex(), removed.GetIndex())
		}
	}
	c.WaitHealthy(ctx, 2)

	var nodes []*droverv1.Node
	for _, s := range survivors {
		n := mock.Node()
		if _, err := registerNode(ctx, s.Conn(), n); err != nil {
			t.Fatalf("write through %s after the removal: %v", s, err)
		}
		nodes = append(nodes, n)
	}
	c.WaitConverged(ctx, survivors...)
	requireNodes(ctx, t, survivors, nodes)
}

// sentSignal is a gRPC stats handler that closes sent once a request
// message has been handed to the transport.
type sentSignal struct {
	once sync.Once
	sent chan struct{}
}

func (h *sentSignal) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h *sentSignal) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (h *sentSignal) HandleConn(context.Context, stats.ConnStats) {}
func (h *sentSignal) HandleRPC(_ context.Context, s stats.RPCStats) {
	if out, ok := s.(*stats.OutPayload); ok && out.Client {
		h.once.Do(func() { close(h.sent) })
	}
}

// TestPausedLeader pauses the leader (SIGSTOP) until the others elect a new
// one, sends a write to the paused old leader, and resumes it: the old
// leader must not acknowledge the write on its own authority. Either the
// write fails Unavailable or it is on every server.
func TestPausedLeader(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	old := c.WaitLeader(ctx)
	others := c.Others(old)

	// A connection of its own to the old leader, established before the
	// pause, that tells when the stale write has left the client.
	signal := &sentSignal{sent: make(chan struct{})}
	staleConn := old.Dial(grpc.WithStatsHandler(signal))
	if _, err := droverv1.NewClusterServiceClient(staleConn).Info(ctx, &droverv1.ServerInfoRequest{}); err != nil {
		t.Fatal(err)
	}

	old.Pause()
	newLeader := c.WaitLeader(ctx, others...)
	var nodes []*droverv1.Node
	for _, s := range others {
		n := mock.Node()
		retryUnavailable(within(t, ctx, 30*time.Second), t, "write through "+s.ID()+" while the old leader is paused", func(ctx context.Context) error {
			_, err := registerNode(ctx, s.Conn(), n)
			return err
		})
		nodes = append(nodes, n)
	}

	stale := mock.Node()
	staleErr := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		_, err := droverv1.NewNodeServiceClient(staleConn).Register(cctx, &droverv1.RegisterNodeRequest{Node: stale.CloneVT()})
		staleErr <- err
	}()
	select {
	case <-signal.sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the write to the paused leader was not sent within 10s")
	}
	old.Resume()

	var err error
	select {
	case err = <-staleErr:
	case <-time.After(50 * time.Second):
		t.Fatal("the write to the resumed old leader got no answer within 50s")
	}
	c.WaitConverged(ctx, c.Servers()...)
	switch {
	case err == nil:
		t.Logf("the old leader acknowledged the write after resuming; it must be on every server")
		nodes = append(nodes, stale)
	case status.Code(err) == codes.Unavailable:
		t.Logf("the old leader refused the write: %v", err)
		for _, s := range c.Servers() {
			if ok, err := nodeKnown(ctx, s, stale); err != nil {
				t.Error(err)
			} else if ok {
				// Allowed (raft may commit an entry the old leader
				// appended), but then it is everywhere: WaitConverged
				// checked that the servers agree.
				t.Logf("the refused write is on %s nevertheless", s)
			}
		}
	default:
		t.Errorf("write to the resumed old leader: %v (code %s), want success or Unavailable", err, status.Code(err))
	}
	requireNodes(ctx, t, c.Servers(), nodes)

	// The old leader has stepped down and follows another server (newLeader,
	// unless a later election chose the other one).
	poll(within(t, ctx, 30*time.Second), t, "old leader "+old.ID()+" a follower", func() (bool, string) {
		info, err := serverInfo(ctx, old)
		if err != nil {
			return false, err.Error()
		}
		return info.GetRaftState() == droverv1.RaftState_RAFT_STATE_FOLLOWER && info.GetLeaderId() != "" && info.GetLeaderId() != old.ID(),
			fmt.Sprintf("%s, leader %q (want a follower of %s)", info.GetRaftState(), info.GetLeaderId(), newLeader)
	})
}

// TestAddServerBecomesVoter adds a fourth server to a running cluster
// through -join alone; autopilot promotes it to voter once it is stable.
func TestAddServerBecomesVoter(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.Args("-server-stabilization-time", "1s"))
	ctx := testContext(t)
	c.WaitLeader(ctx)
	nodes := registerNodes(ctx, t, c.Server(1).Conn(), 20, 2)

	added := c.AddServer()
	c.WaitHealthy(ctx, 4)
	c.WaitLeader(ctx) // the added server agrees on the leader
	peers, err := droverv1.NewOperatorServiceClient(added.Conn()).RaftListPeers(ctx, &droverv1.RaftListPeersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	checkPeers(t, "peers after adding "+added.ID(), peers, c.Servers())

	n := mock.Node()
	if _, err := registerNode(ctx, added.Conn(), n); err != nil {
		t.Fatalf("write through the added server: %v", err)
	}
	c.WaitConverged(ctx)
	requireNodes(ctx, t, c.Servers(), append(nodes, n))
}

// TestLeaderStopHandsOver stops the leader with SIGTERM: it transfers
// leadership before it exits, and the other two go on taking writes.
func TestLeaderStopHandsOver(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	leader.Stop()
	rec, ok := leader.Logged("leadership transferred")
	if !ok {
		t.Fatalf("stopped leader %s did not log a leadership transfer", leader)
	}
	newLeader := c.WaitLeader(ctx, c.Others(leader)...)
	if got := fmt.Sprint(rec["new_leader"]); got != newLeader.ID() {
		t.Errorf("leadership transferred to %q, cluster now led by %s", got, newLeader)
	}
	for _, s := range c.Others(leader) {
		n := mock.Node()
		retryUnavailable(within(t, ctx, 30*time.Second), t, "write through "+s.ID()+" after the handover", func(ctx context.Context) error {
			_, err := registerNode(ctx, s.Conn(), n)
			return err
		})
	}
}
