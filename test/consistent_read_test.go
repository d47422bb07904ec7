package test_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// staleReads is how many consistent reads are queued at the paused leader
// at once: the window in which a resumed leader still believes it leads is
// short, and every read queued in its socket gets a chance to fall into it.
const (
	staleReads     = 400
	staleConnCount = 8
	loadWriters    = 16
)

// sentCounter is a gRPC stats handler that tells when a number of request
// messages have been handed to the transport (see arm).
type sentCounter struct {
	mu   sync.Mutex
	left int
	sent chan struct{}
}

// arm returns a channel closed once want more request messages have been
// sent.
func (h *sentCounter) arm(want int) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.left, h.sent = want, make(chan struct{})
	return h.sent
}

func (h *sentCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (h *sentCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (h *sentCounter) HandleConn(context.Context, stats.ConnStats)                       {}
func (h *sentCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	out, ok := s.(*stats.OutPayload)
	if !ok || !out.Client {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.left--; h.left == 0 && h.sent != nil {
		close(h.sent)
		h.sent = nil
	}
}

// TestPausedLeaderConsistentRead pauses the leader (SIGSTOP, as a long GC
// pause or a stalled VM does) until the others elect a new leader and
// acknowledge a write, then sends consistent reads of that write to the
// paused old leader and resumes it. Every read must see the write or fail
// Unavailable: an answer from the old leader's own state, which lacks the
// write, is a stale read.
func TestPausedLeaderConsistentRead(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	old := c.WaitLeader(ctx)
	others := c.Others(old)

	// Connections of their own to the old leader, established before the
	// pause, that tell when every read has left the client.
	signal := &sentCounter{}
	var staleConns []*grpc.ClientConn
	for range staleConnCount {
		conn := old.Dial(grpc.WithStatsHandler(signal))
		if _, err := droverv1.NewClusterServiceClient(conn).Info(ctx, &droverv1.ServerInfoRequest{}); err != nil {
			t.Fatal(err)
		}
		staleConns = append(staleConns, conn)
	}

	// Writes flow into the old leader before, during and after the pause,
	// as under load: when it resumes, its raft loop is busy with their
	// disk writes, which is when it is slow to notice it no longer leads.
	writing, stopWriting := context.WithCancel(ctx)
	var writers sync.WaitGroup
	for i := range loadWriters {
		writers.Go(func() {
			for writing.Err() == nil {
				cctx, cancel := context.WithTimeout(writing, 45*time.Second)
				_, _ = droverv1.NewJobServiceClient(staleConns[i%len(staleConns)]).Register(cctx,
					&droverv1.RegisterJobRequest{Job: mock.Job(0), RequestId: uuid.NewString()})
				cancel()
			}
		})
	}
	defer writers.Wait()
	defer stopWriting()

	old.Pause()
	c.WaitLeader(ctx, others...)
	n := mock.Node()
	retryUnavailable(within(t, ctx, 30*time.Second), t, "write through the new leader", func(ctx context.Context) error {
		_, err := registerNode(ctx, others[0].Conn(), n)
		return err
	})

	sent := signal.arm(staleReads)
	var wg sync.WaitGroup
	errs := make(chan error, staleReads)
	for i := range staleReads {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
			defer cancel()
			// Half are blocking queries: their first answer is consistent too.
			q := &droverv1.QueryOptions{}
			if i%2 == 1 {
				q.MinIndex, q.MaxWait = 1, durationpb.New(time.Second)
			}
			_, err := droverv1.NewNodeServiceClient(staleConns[i%len(staleConns)]).Get(cctx, &droverv1.GetNodeRequest{NodeId: n.GetId(), Query: q})
			errs <- err
		})
	}
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatalf("the %d reads to the paused leader were not all sent within 10s", staleReads)
	}
	old.Resume()
	wg.Wait()
	close(errs)
	seen, refused := 0, 0
	for err := range errs {
		switch status.Code(err) {
		case codes.OK:
			seen++
		case codes.Unavailable:
			refused++
		case codes.NotFound:
			t.Errorf("stale read: the resumed old leader %s answered from its own state without node %s, acknowledged by the new leader before the read (%v)",
				old, n.GetId(), err)
		default:
			t.Errorf("consistent read from the resumed old leader: %v (code %s), want the node or Unavailable", err, status.Code(err))
		}
	}
	t.Logf("%d reads saw the write, %d were refused Unavailable", seen, refused)
}

// TestLaggingFollowerStaleReads cuts a follower off from the leader's raft
// traffic (a proxy that holds bytes, as a congested link does) while the
// leader acknowledges a write. The follower's stale reads say how stale
// they may be; a stale read that accepts less staleness than that goes to
// the leader; and a read that carries an index the caller saw elsewhere is
// refused rather than answered from older state. Once the link is back,
// everything on the follower is fresh again.
func TestLaggingFollowerStaleReads(t *testing.T) {
	ctx := within(t, testContext(t), 3*time.Minute)
	proxy := cluster.NewProxy(t)
	c, leader, follower := laggableFollower(ctx, t, proxy)
	before := mock.Node()
	if _, err := registerNode(ctx, leader.Conn(), before); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(ctx)

	proxy.Stall()
	after := mock.Node()
	resp, err := registerNode(ctx, leader.Conn(), after)
	if err != nil {
		t.Fatal(err)
	}
	nodes := droverv1.NewNodeServiceClient(follower.Conn())
	stale := &droverv1.QueryOptions{AllowStale: true}
	poll(ctx, t, follower.ID()+" out of touch for over 300ms", func() (bool, string) {
		got, err := nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: before.GetId(), Query: stale})
		if err != nil {
			return false, err.Error()
		}
		last := got.GetMeta().GetLastContact().AsDuration()
		return last > 300*time.Millisecond, "last contact " + last.String()
	})
	if _, err := nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: after.GetId(), Query: stale}); status.Code(err) != codes.NotFound {
		t.Fatalf("stale read of the node written during the stall: %v, want NotFound from the lagging follower", err)
	}
	bounded := &droverv1.QueryOptions{AllowStale: true, MaxStale: durationpb.New(200 * time.Millisecond)}
	got, err := nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: after.GetId(), Query: bounded})
	if err != nil {
		t.Fatalf("stale read with max_stale 200ms from a follower out of touch for longer: %v, want the leader's answer", err)
	}
	if got.GetMeta().GetLastContact().AsDuration() != 0 {
		t.Errorf("answer beyond max_stale has last_contact %s, want 0 (the leader's)", got.GetMeta().GetLastContact().AsDuration())
	}

	// The caller has seen index resp.Index (on the leader): the follower,
	// behind it, refuses instead of answering from older state.
	seen := &droverv1.QueryOptions{AllowStale: true, MinIndex: resp.GetIndex(), MaxWait: durationpb.New(time.Minute)}
	if _, err := nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: before.GetId(), Query: seen}); status.Code(err) != codes.Unavailable || !retryInfo(err) {
		t.Fatalf("read behind the caller's index: %v, want Unavailable with a retry hint", err)
	}
	_, err = nodes.GetAllocs(ctx, &droverv1.GetAllocsRequest{NodeId: before.GetId(), SecretId: before.GetSecretId(),
		MinIndex: resp.GetIndex(), MaxWait: durationpb.New(time.Minute)})
	if status.Code(err) != codes.Unavailable || !retryInfo(err) {
		t.Fatalf("GetAllocs behind the agent's index: %v, want Unavailable with a retry hint", err)
	}

	proxy.Resume()
	poll(ctx, t, follower.ID()+" fresh again", func() (bool, string) {
		got, err := nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: after.GetId(), Query: bounded})
		if err != nil {
			return false, err.Error()
		}
		return got.GetMeta().GetLastContact().AsDuration() > 0 && got.GetMeta().GetLastContact().AsDuration() < 200*time.Millisecond,
			"last contact " + got.GetMeta().GetLastContact().AsDuration().String()
	})
	if _, err := nodes.GetAllocs(ctx, &droverv1.GetAllocsRequest{NodeId: after.GetId(), SecretId: after.GetSecretId(),
		MinIndex: resp.GetIndex(), MaxWait: durationpb.New(100 * time.Millisecond)}); err != nil {
		t.Fatalf("GetAllocs once caught up: %v", err)
	}
}

// laggableFollower starts a 3-server cluster (with HTTP addresses) whose
// third server's raft traffic passes through proxy, so that the test can
// stall it, and returns it with the leader and that follower once every server has
// announced itself. Raft timings are stretched tenfold so that a stall of
// a few seconds starts no election.
func laggableFollower(ctx context.Context, t *testing.T, proxy *cluster.Proxy) (c *cluster.Cluster, leader, follower *cluster.Server) {
	t.Helper()
	const lagging = 3
	c = cluster.New(t, droverBin, 3, httpArgs(),
		cluster.ServerArgs(lagging, "-raft-advertise", proxy.Addr(), "-raft-multiplier", "10"),
		cluster.BeforeFirstStart(func(s *cluster.Server) {
			if s.ID() == "s"+itoa(lagging) {
				proxy.SetTarget(s.RaftAddr())
			}
		}))
	follower = c.Server(lagging)
	leader = c.WaitLeader(ctx)
	if leader == follower {
		target := c.Others(follower)[0]
		if _, err := droverv1.NewOperatorServiceClient(leader.Conn()).RaftTransferLeadership(ctx, &droverv1.RaftTransferLeadershipRequest{Id: target.ID()}); err != nil {
			t.Fatalf("transfer leadership to %s: %v", target, err)
		}
		leader = c.WaitLeader(ctx, c.Others(follower)...)
	}
	// A follower forwards to the leader at the address in the leader's
	// server record, written when the leader announces itself: wait for
	// every announcement (the cluster id is written after the last one).
	poll(ctx, t, "every server announced", func() (bool, string) {
		info, err := serverInfo(ctx, leader)
		return err == nil && info.GetClusterId() != "", fmt.Sprint(err)
	})
	c.WaitConverged(ctx)
	return c, leader, follower
}

// TestFollowerConsistentReads reads through a follower with allow_stale
// off, right after each write the leader acknowledges. While the follower
// hears the leader it answers from its own state once it holds the
// leader's read index: every read sees the write before it, reports no
// staleness, and the follower counts it as answered there. With the
// follower's raft link stalled its state cannot reach the index, and the
// read of a write acknowledged during the stall still sees it: the
// follower hands the read to the leader rather than answer from its state.
func TestFollowerConsistentReads(t *testing.T) {
	ctx := within(t, testContext(t), 3*time.Minute)
	proxy := cluster.NewProxy(t)
	_, leader, follower := laggableFollower(ctx, t, proxy)
	nodes := droverv1.NewNodeServiceClient(follower.Conn())
	consistent := &droverv1.QueryOptions{}

	const reads = 20
	before := consistentReadCounts(ctx, t, follower)
	for i := range reads {
		n := mock.Node()
		if _, err := registerNode(ctx, leader.Conn(), n); err != nil {
			t.Fatal(err)
		}
		got, err := nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: n.GetId(), Query: consistent})
		if err != nil {
			t.Fatalf("read %d: consistent read from follower %s of node %s, acknowledged by leader %s before the read: %v",
				i, follower, n.GetId(), leader, err)
		}
		if last := got.GetMeta().GetLastContact().AsDuration(); last != 0 {
			t.Errorf("read %d: consistent answer reports last_contact %s, want 0", i, last)
		}
	}
	after := consistentReadCounts(ctx, t, follower)
	here, forwarded := after["follower"]-before["follower"], after["forwarded"]-before["forwarded"]
	if here+forwarded != reads || here == 0 {
		t.Fatalf("of %d consistent reads, %s answered %v itself and forwarded %v: want them answered there (a few may be forwarded)",
			reads, follower, here, forwarded)
	}
	t.Logf("%v of %d answered by the follower", here, reads)

	proxy.Stall()
	defer proxy.Resume()
	n := mock.Node()
	if _, err := registerNode(ctx, leader.Conn(), n); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: n.GetId(), Query: consistent}); err != nil {
		t.Fatalf("consistent read from follower %s, whose raft link is stalled, of node %s acknowledged by leader %s: %v (NotFound is a stale read)",
			follower, n.GetId(), leader, err)
	}
	stalled := consistentReadCounts(ctx, t, follower)
	if stalled["forwarded"]-after["forwarded"] != 1 {
		t.Errorf("the read during the stall: forwarded %v times, want once", stalled["forwarded"]-after["forwarded"])
	}
}

// consistentReadCounts scrapes drover_consistent_reads_total from a server,
// by its answered label.
func consistentReadCounts(ctx context.Context, t *testing.T, s *cluster.Server) map[string]float64 {
	t.Helper()
	counts := make(map[string]float64)
	re := regexp.MustCompile(`(?m)^drover_consistent_reads_total\{answered="(\w+)"\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(scrape(ctx, t, s.Info().HTTPAddr), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("drover_consistent_reads_total{answered=%q} = %q: %v", m[1], m[2], err)
		}
		counts[m[1]] = v
	}
	if len(counts) == 0 {
		t.Fatalf("%s exports no drover_consistent_reads_total", s)
	}
	return counts
}
