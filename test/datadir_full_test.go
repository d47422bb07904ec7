package test_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// fullDiskMessage is what a refusal for a full data dir says.
const fullDiskMessage = "did not store the write: data dir "

// TestDataDirFull fills the file system of a server's data dir (a tmpfs)
// while clients write through every server: first the leader's, then a
// follower's, then every server's. Writes must succeed where a majority
// has space and otherwise be refused with UNAVAILABLE naming the full data
// dir; a full leader must hand leadership over; nothing may crash. Once
// the filler is deleted the servers resume by themselves, agree on their
// state, hold every acknowledged write, and start cleanly from their data
// dirs.
func TestDataDirFull(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.TmpfsDataDir(64<<20), cluster.Args("-data-dir-reserve", "4MiB"),
		cluster.Snapshots(256, time.Second, 128))
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	leader := c.WaitLeader(ctx)
	// Every server has announced itself: the leader can ask each whether
	// it has space.
	c.WaitHealthy(ctx, 3)
	w := startNodeWriters(ctx, t, c.Servers())

	// The leader's disk fills: it hands leadership to a server with space,
	// and writes go on through every server, the full one included.
	w.waitAcks(t, ctx, 50)
	leader.FillDataDir(0)
	waitStorageError(t, ctx, leader, true)
	newLeader := waitLeaderOtherThan(t, ctx, c, leader)
	// Either the storage watch handed leadership over, or raft stepped
	// down by itself when an append failed (before the watch looked).
	_, handedOver := leader.Logged("data dir full; handing leadership over", "to", newLeader.ID())
	_, steppedDown := leader.Logged("failed to commit logs")
	if !handedOver && !steppedDown {
		t.Errorf("%s neither logged handing leadership to %s nor raft stepping down after a failed append", leader, newLeader)
	}
	w.waitAcksThrough(t, ctx, c.Servers(), 20)
	leader.FreeDataDir()
	waitStorageError(t, ctx, leader, false)
	w.waitAcksThrough(t, ctx, c.Servers(), 20)
	w.stopAndCheck(t, ctx, c, "leader's data dir full")

	// A follower's disk fills: the others go on; it falls behind beyond
	// the log the leader keeps, and catches up once space is freed.
	leader = c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	w = startNodeWriters(ctx, t, c.Servers(), w.allAcked()...)
	follower.FillDataDir(0)
	waitStorageError(t, ctx, follower, true)
	stalled, err := serverInfo(ctx, follower)
	if err != nil {
		t.Fatal(err)
	}
	poll(within(t, ctx, time.Minute), t, "leader compacted its log past the full follower's last entry", func() (bool, string) {
		compacted := compactedTo(leader)
		return compacted > stalled.GetLastIndex(), fmt.Sprintf("leader's log compacted up to %d, follower stuck at %d", compacted, stalled.GetLastIndex())
	})
	if now, err := serverInfo(ctx, follower); err != nil || now.GetLastIndex() != stalled.GetLastIndex() {
		t.Errorf("full follower's log moved from %d to %d (%v): it appended below its reserve", stalled.GetLastIndex(), now.GetLastIndex(), err)
	}
	follower.FreeDataDir()
	waitStorageError(t, ctx, follower, false)
	w.waitAcksThrough(t, ctx, c.Servers(), 20)
	w.stopAndCheck(t, ctx, c, "follower's data dir full")
	// The leader no longer had the entries it missed: it caught up from a
	// snapshot, which its snapshot store refused while it was full.
	if _, ok := follower.Logged(installedSnapshot); !ok {
		t.Errorf("%s caught up without installing a snapshot", follower)
	}

	// Every disk fills: no write can be stored, and each is refused with
	// the reason; the cluster keeps a leader and serves again once space
	// is freed.
	// The followers' fill first: the leader keeps leading while entries
	// it holds cannot commit, and once its own data dir fills it must
	// stop waiting for them, or every write behind them waits too.
	leader = c.WaitLeader(ctx)
	w = startNodeWriters(ctx, t, c.Servers(), w.allAcked()...)
	for _, s := range append(c.Others(leader), leader) {
		s.FillDataDir(0)
		waitStorageError(t, ctx, s, true)
	}
	// A follower's forwarder retries the leader's refusal until its leader
	// hold (5s) ends, in case leadership moves to a server with space.
	refused, _ := w.refusals()
	poll(within(t, ctx, 90*time.Second), t, "10 writes refused for a full data dir", func() (bool, string) {
		now, last := w.refusals()
		return now-refused >= 10, fmt.Sprintf("%d refused; last UNAVAILABLE: %s; other answers: %s", now-refused, last, w.lastUnexpected())
	})
	c.WaitLeader(ctx)
	for _, s := range c.Servers() {
		s.FreeDataDir()
	}
	w.waitAcksThrough(t, ctx, c.Servers(), 20)
	w.stopAndCheck(t, ctx, c, "every data dir full")
	if detail := w.sample(); detail == nil {
		t.Error("no refusal carried a RetryInfo detail")
	}

	// Every data dir passes its start-up checks after the faults.
	for _, s := range c.Servers() {
		s.Restart()
	}
	c.WaitLeader(ctx)
	c.WaitConverged(ctx)
	requireNodes(ctx, t, c.Servers(), w.allAcked())
}

// nodeWriters register new nodes through every server in turn until
// stopped, retrying a node on UNAVAILABLE, and record what was
// acknowledged (nodes are idempotent: a retry of an applied registration
// changes nothing).
type nodeWriters struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	acked      []*droverv1.Node
	ackedVia   map[string]int
	refused    int // UNAVAILABLE naming a full data dir
	retryInfo  *errdetails.RetryInfo
	lastRetry  string // the last UNAVAILABLE answer, for failure messages
	unexpected []string
	// previous are the nodes acknowledged by earlier writers of the test.
	previous []*droverv1.Node
}

func startNodeWriters(ctx context.Context, t *testing.T, servers []*cluster.Server, previous ...*droverv1.Node) *nodeWriters {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	w := &nodeWriters{cancel: cancel, ackedVia: map[string]int{}, previous: previous}
	for i := range 3 {
		w.wg.Go(func() { w.run(ctx, servers, i) })
	}
	return w
}

func (w *nodeWriters) run(ctx context.Context, servers []*cluster.Server, next int) {
	for {
		n := mock.Node()
		for {
			s := servers[next%len(servers)]
			next++
			_, err := registerNode(ctx, s.Conn(), n)
			if ctx.Err() != nil {
				return
			}
			if w.record(s, n, err) {
				break
			}
			time.Sleep(retryPause) // backoff before retrying the node elsewhere
		}
	}
}

// record notes a call's outcome and reports whether the node is done with.
func (w *nodeWriters) record(s *cluster.Server, n *droverv1.Node, err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, _ := status.FromError(err)
	switch {
	case err == nil:
		w.acked = append(w.acked, n)
		w.ackedVia[s.ID()]++
		return true
	case st.Code() != codes.Unavailable:
		w.unexpected = append(w.unexpected, fmt.Sprintf("register node %s through %s: %v (code %s)", n.GetId(), s, err, st.Code()))
		return true
	}
	w.lastRetry = st.Message()
	switch {
	case strings.Contains(st.Message(), fullDiskMessage) && strings.Contains(st.Message(), " is full"):
		w.refused++
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok && w.retryInfo == nil {
				w.retryInfo = ri
			}
		}
	}
	return false
}

func (w *nodeWriters) refusals() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused, w.lastRetry
}

// lastUnexpected describes the answers other than success and UNAVAILABLE
// so far, for failure messages.
func (w *nodeWriters) lastUnexpected() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.unexpected) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d, the last: %s", len(w.unexpected), w.unexpected[len(w.unexpected)-1])
}

func (w *nodeWriters) sample() *errdetails.RetryInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.retryInfo
}

// allAcked returns every node acknowledged, by these writers and earlier
// ones.
func (w *nodeWriters) allAcked() []*droverv1.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(append([]*droverv1.Node(nil), w.previous...), w.acked...)
}

// waitAcks waits until n more writes are acknowledged.
func (w *nodeWriters) waitAcks(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	w.mu.Lock()
	from := len(w.acked)
	w.mu.Unlock()
	poll(within(t, ctx, time.Minute), t, fmt.Sprintf("%d writes acknowledged", n), func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.acked)-from >= n, fmt.Sprintf("%d acknowledged", len(w.acked)-from)
	})
}

// waitAcksThrough waits until n more writes are acknowledged through each
// of servers.
func (w *nodeWriters) waitAcksThrough(t *testing.T, ctx context.Context, servers []*cluster.Server, n int) {
	t.Helper()
	w.mu.Lock()
	from := copyCounts(w.ackedVia)
	w.mu.Unlock()
	poll(within(t, ctx, time.Minute), t, fmt.Sprintf("%d writes acknowledged through each server", n), func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, s := range servers {
			if w.ackedVia[s.ID()]-from[s.ID()] < n {
				return false, fmt.Sprintf("acknowledged through each server before %v, now %v; %d refusals for a full disk", from, w.ackedVia, w.refused)
			}
		}
		return true, ""
	})
}

// stopAndCheck stops the writers, fails the test on any answer other than
// success or UNAVAILABLE, and checks that every server converges and holds
// every acknowledged write.
func (w *nodeWriters) stopAndCheck(t *testing.T, ctx context.Context, c *cluster.Cluster, phase string) {
	t.Helper()
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	for _, u := range w.unexpected {
		t.Errorf("%s: %s", phase, u)
	}
	t.Logf("%s: %d writes acknowledged (%v), %d refused for a full data dir", phase, len(w.acked), w.ackedVia, w.refused)
	w.mu.Unlock()
	c.WaitConverged(ctx)
	requireNodes(ctx, t, c.Servers(), w.allAcked())
}

// waitStorageError waits until s reports (or stops reporting) that its
// data dir is full.
func waitStorageError(t *testing.T, ctx context.Context, s *cluster.Server, full bool) {
	t.Helper()
	poll(within(t, ctx, 30*time.Second), t, fmt.Sprintf("%s reports its data dir full: %v", s, full), func() (bool, string) {
		info, err := serverInfo(ctx, s)
		if err != nil {
			return false, err.Error()
		}
		reported := strings.Contains(info.GetStorageError(), " is full")
		return reported == full, fmt.Sprintf("storage error %q", info.GetStorageError())
	})
}

// waitLeaderOtherThan waits until the cluster agrees on a leader other
// than s, and returns it.
func waitLeaderOtherThan(t *testing.T, ctx context.Context, c *cluster.Cluster, s *cluster.Server) *cluster.Server {
	t.Helper()
	var leader *cluster.Server
	poll(within(t, ctx, 30*time.Second), t, "a leader other than "+s.ID(), func() (bool, string) {
		ids := map[string]bool{}
		for _, srv := range c.Servers() {
			info, err := serverInfo(ctx, srv)
			if err != nil {
				return false, err.Error()
			}
			ids[info.GetLeaderId()] = true
		}
		if len(ids) != 1 || ids[""] || ids[s.ID()] {
			return false, fmt.Sprintf("leaders seen: %v", ids)
		}
		for id := range ids {
			for _, srv := range c.Servers() {
				if srv.ID() == id {
					leader = srv
				}
			}
		}
		return true, ""
	})
	return leader
}

// compactedTo returns the highest index up to which s's raft has deleted
// its log after a snapshot, as its current run logged it.
func compactedTo(s *cluster.Server) uint64 {
	var to uint64
	for _, rec := range s.LogRecords() {
		if v, ok := rec["to"].(float64); ok && rec["msg"] == "compacting logs" {
			to = max(to, uint64(v))
		}
	}
	return to
}
