package test_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// newNetnsCluster starts n servers, each in a network namespace of its own
// (cluster.Netns), and checks when the test ends, after the harness has
// cleaned up, that nothing of the cluster's network is left.
func newNetnsCluster(t *testing.T, n int, opts ...cluster.Option) *cluster.Cluster {
	t.Helper()
	var c *cluster.Cluster
	// Registered before New, so it runs after the cluster's own cleanup.
	t.Cleanup(func() {
		if c != nil {
			requireNetworkGone(t, c.Network())
		}
	})
	c = cluster.New(t, droverBin, n, append([]cluster.Option{cluster.Netns()}, opts...)...)
	return c
}

// requireNetworkGone fails the test if a namespace, link or route of w is
// still in the root namespace, as the ip command lists them.
func requireNetworkGone(t *testing.T, w cluster.Network) {
	t.Helper()
	if w.Bridge == "" {
		t.Error("the cluster reports no network")
		return
	}
	nss := namespaces(t)
	var links []struct {
		Name string `json:"ifname"`
	}
	ipJSON(t, &links, "link", "show")
	var routes []struct {
		Dst string `json:"dst"`
	}
	ipJSON(t, &routes, "-4", "route", "show", "table", "all")
	ours := append([]string{w.Bridge}, w.Namespaces...)
	for _, ns := range nss {
		if slices.Contains(w.Namespaces, ns) {
			t.Errorf("namespace %s is left after the test", ns)
		}
	}
	for _, l := range links {
		if slices.Contains(ours, l.Name) {
			t.Errorf("link %s is left after the test", l.Name)
		}
	}
	for _, r := range routes {
		if r.Dst == w.Subnet.String() {
			t.Errorf("a route to %s is left after the test", r.Dst)
		}
	}
}

// namespaces lists the named network namespaces.
func namespaces(t *testing.T) []string {
	t.Helper()
	var nss []struct {
		Name string `json:"name"`
	}
	ipJSON(t, &nss, "netns", "list")
	var out []string
	for _, ns := range nss {
		out = append(out, ns.Name)
	}
	return out
}

// ipJSON runs ip -j with args and decodes what it prints into v.
func ipJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-j"}, args...)...).Output()
	if err != nil {
		t.Fatalf("ip -j %s: %v", strings.Join(args, " "), err)
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		return // ip netns list prints nothing when there is none
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("ip -j %s: %v", strings.Join(args, " "), err)
	}
}

// droppedFromPeers returns how many packets the network namespace of s has
// dropped on input for want of a route back, which in the harness's
// namespaces means: from a peer whose packets a cut drops (IP
// InAddrErrors, read through the server's process).
func droppedFromPeers(t *testing.T, s *cluster.Server) uint64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/snmp", s.Pid()))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	defer f.Close()
	var header []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "Ip:" {
			continue
		}
		if header == nil {
			header = fields
			continue
		}
		i := slices.Index(header, "InAddrErrors")
		if i < 0 || i >= len(fields) {
			break
		}
		n, err := strconv.ParseUint(fields[i], 10, 64)
		if err != nil {
			t.Fatalf("%s: InAddrErrors %q: %v", s, fields[i], err)
		}
		return n
	}
	t.Fatalf("%s: no Ip InAddrErrors in /proc/%d/net/snmp (%v)", s, s.Pid(), sc.Err())
	return 0
}

// raftView describes what s knows of the leader.
func raftView(ctx context.Context, s *cluster.Server) (*droverv1.ServerInfoResponse, string) {
	info, err := serverInfo(ctx, s)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", s, err)
	}
	return info, fmt.Sprintf("%s: %s, leader %q, last contact %dms", s, info.GetRaftState(), info.GetLeaderId(),
		info.GetLastContact()/1e6)
}

// waitLeaderless waits until every one of servers reports that it knows no
// leader and is not one: none of them hears from a leader.
func waitLeaderless(ctx context.Context, t *testing.T, servers ...*cluster.Server) {
	t.Helper()
	poll(ctx, t, "without a leader: "+fmt.Sprint(servers), func() (bool, string) {
		var views []string
		ok := true
		for _, s := range servers {
			info, view := raftView(ctx, s)
			views = append(views, view)
			if info == nil || info.GetLeaderId() != "" || info.GetRaftState() == droverv1.RaftState_RAFT_STATE_LEADER {
				ok = false
			}
		}
		return ok, strings.Join(views, "; ")
	})
}

// waitRecorded waits until the servers table, as the leader lists it,
// holds every server's gRPC address, and every server has applied it
// (RaftListPeers reads the table; ServerMembers also shows what autopilot's
// probes found). A
// follower forwards to the leader at the address recorded there; a server
// whose announcement is still in flight when a partition starts may stay
// unrecorded (and so unreachable through followers, should it become the
// leader) until that call times out, which the harness tests do not wait
// for.
func waitRecorded(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	poll(ctx, t, "every server recorded", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		peers, err := droverv1.NewOperatorServiceClient(c.Server(1).Conn()).RaftListPeers(cctx, &droverv1.RaftListPeersRequest{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range c.Servers() {
			if !slices.ContainsFunc(peers.GetPeers(), func(p *droverv1.RaftPeer) bool {
				return p.GetId() == s.ID() && p.GetRpcAddr() == s.RPCAddr()
			}) {
				return false, fmt.Sprintf("%s is not recorded: %v", s, peers.GetPeers())
			}
		}
		return true, ""
	})
	c.WaitConverged(ctx)
}

// writeJob registers a new job through s, retrying while s answers
// Unavailable (an election), and returns it.
func writeJob(ctx context.Context, t *testing.T, s *cluster.Server) *droverv1.Job {
	t.Helper()
	j := mock.Job(1)
	id := uuid.NewString()
	retryUnavailable(ctx, t, "register job "+j.GetId()+" through "+s.ID(), func(ctx context.Context) error {
		_, err := registerJob(ctx, s.Conn(), j, id)
		return err
	})
	return j
}

// requireNoCommit sends a job registration to s, which cannot reach a
// majority, and requires it to fail (Unavailable, or the call's deadline).
// It returns the job, which is on every server or on none once the
// partition heals.
func requireNoCommit(ctx context.Context, t *testing.T, s *cluster.Server) *droverv1.Job {
	t.Helper()
	j := mock.Job(1)
	_, err := registerJob(ctx, s.Conn(), j, uuid.NewString())
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		t.Logf("a write through %s, cut off from the majority, failed: %v", s, err)
	case codes.OK:
		t.Fatalf("%s, cut off from the majority, acknowledged job %s", s, j.GetId())
	default:
		t.Fatalf("a write through %s, cut off from the majority: %v (code %s), want Unavailable or DeadlineExceeded",
			s, err, status.Code(err))
	}
	return j
}

// requireJob fails the test unless s knows the job, from its own state.
func requireJob(ctx context.Context, t *testing.T, s *cluster.Server, j *droverv1.Job, want bool) {
	t.Helper()
	ok, err := jobKnown(ctx, s, j.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if ok != want {
		t.Fatalf("%s knows job %s: %v, want %v", s, j.GetId(), ok, want)
	}
}

// TestPartitionIsolatedLeader isolates the leader of three servers in
// network namespaces: the other two elect a leader and commit, the old
// leader commits nothing and still answers stale reads from its old state,
// and once the partition heals every server converges.
func TestPartitionIsolatedLeader(t *testing.T) {
	c := newNetnsCluster(t, 3)
	ctx := testContext(t)
	old := c.WaitLeader(ctx)
	others := c.Others(old)
	before := writeJob(ctx, t, old)
	waitRecorded(ctx, t, c)
	dropped := droppedFromPeers(t, old)

	c.Isolate(old)
	// The majority hears nothing more from the old leader on the raft
	// connections it already had, and elects another.
	c.WaitLeader(ctx, others...)
	during := writeJob(ctx, t, others[0])
	// The old leader steps down once it has lost contact with a majority.
	poll(ctx, t, "old leader "+old.ID()+" stepped down", func() (bool, string) {
		info, view := raftView(ctx, old)
		return info != nil && info.GetRaftState() != droverv1.RaftState_RAFT_STATE_LEADER, view
	})
	refused := requireNoCommit(ctx, t, old)
	// Stale reads answer from the old state: what was there before, not
	// what the majority committed since.
	requireJob(ctx, t, old, before, true)
	requireJob(ctx, t, old, during, false)
	if _, err := droverv1.NewJobServiceClient(old.Conn()).Get(ctx, &droverv1.GetJobRequest{JobId: before.GetId()}); err == nil {
		t.Errorf("%s, cut off from the majority, answered a read that does not allow stale", old)
	}
	if n := droppedFromPeers(t, old); n <= dropped {
		t.Errorf("the namespace of %s dropped no packet of its peers (InAddrErrors %d before, %d now)", old, dropped, n)
	}

	c.Heal()
	c.WaitConverged(ctx, c.Servers()...)
	c.WaitLeader(ctx)
	for _, s := range c.Servers() {
		requireJob(ctx, t, s, during, true)
	}
	ok, err := jobKnown(ctx, old, refused.GetId())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the write refused during the partition is on every server after it: %v", ok)
}

// requireOwnNamespace checks that the process the harness holds for s is
// the drover server itself (not the ip command that started it) and that
// it runs in the server's network namespace, not the test's.
func requireOwnNamespace(t *testing.T, s *cluster.Server) {
	t.Helper()
	pid := s.Pid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	want, err := filepath.EvalSymlinks(droverBin)
	if err != nil {
		t.Fatal(err)
	}
	if exe != want {
		t.Errorf("%s: process %d runs %s, want %s", s, pid, exe, want)
	}
	procNS := inode(t, fmt.Sprintf("/proc/%d/ns/net", pid))
	if named := inode(t, "/run/netns/"+s.Netns()); procNS != named {
		t.Errorf("%s: process %d is in network namespace %v, not %s (%v)", s, pid, procNS, s.Netns(), named)
	}
	if self := inode(t, "/proc/self/ns/net"); procNS == self {
		t.Errorf("%s: process %d is in the test's own network namespace", s, pid)
	}
}

// inode identifies the file at path (a namespace, for nsfs files).
func inode(t *testing.T, path string) [2]uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint64{uint64(st.Dev), st.Ino}
}

// TestNetnsServerLifecycle runs the process controls on servers in network
// namespaces: each listens on its namespace's address, Pause, Kill,
// Restart and AddServer work, and a cut survives the restart of a server.
func TestNetnsServerLifecycle(t *testing.T) {
	c := newNetnsCluster(t, 3)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	subnet := c.Network().Subnet
	for _, s := range c.Servers() {
		requireOwnNamespace(t, s)
		for _, addr := range []string{s.RPCAddr(), s.RaftAddr()} {
			if ap, err := netip.ParseAddrPort(addr); err != nil || !subnet.Contains(ap.Addr()) {
				t.Errorf("%s listens on %s, outside the cluster's subnet %s", s, addr, subnet)
			}
		}
	}
	f := c.Others(leader)[0]

	f.Pause()
	writeJob(ctx, t, leader)
	f.Resume()
	f.Kill()
	writeJob(ctx, t, leader)
	f.Restart()
	requireOwnNamespace(t, f)

	// A server cut off stays cut off across a restart: the cuts belong to
	// its namespace, not its process.
	c.Isolate(f)
	f.Restart()
	requireOwnNamespace(t, f)
	dropped := droppedFromPeers(t, f)
	poll(ctx, t, f.ID()+" dropping its peers' packets after its restart", func() (bool, string) {
		n := droppedFromPeers(t, f)
		return n > dropped, fmt.Sprintf("InAddrErrors %d, %d after the restart", n, dropped)
	})
	waitLeaderless(ctx, t, f)
	c.Heal()

	added := c.AddServer()
	requireOwnNamespace(t, added)
	j := writeJob(ctx, t, added)
	c.WaitConverged(ctx, c.Servers()...)
	for _, s := range c.Servers() {
		requireJob(ctx, t, s, j, true)
	}
}

// TestPartitionMinorityAndBridge splits five servers in network namespaces
// into a minority holding the leader and a majority, then into a bridge
// topology: one server linked to two halves that cannot reach each other.
func TestPartitionMinorityAndBridge(t *testing.T) {
	c := newNetnsCluster(t, 5)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	waitRecorded(ctx, t, c)
	others := c.Others(leader)
	minority, majority := []*cluster.Server{leader, others[0]}, others[1:]

	c.Partition(minority, majority)
	c.WaitLeader(ctx, majority...)
	during := writeJob(ctx, t, majority[0])
	waitLeaderless(ctx, t, minority...)
	requireNoCommit(ctx, t, minority[1])
	requireJob(ctx, t, minority[0], during, false)
	c.Heal()
	c.WaitConverged(ctx, c.Servers()...)
	for _, s := range minority {
		requireJob(ctx, t, s, during, true)
	}

	leader = c.WaitLeader(ctx)
	bridge := c.Others(leader)[0]
	first, second := c.Bridge(bridge)
	leaderSide, farSide := first, second
	if !slices.Contains(first, leader) {
		leaderSide, farSide = second, first
	}
	// The far side hears from no leader and cannot elect one: the bridge
	// and the leader's side still follow the leader, and so refuse their
	// votes.
	waitLeaderless(ctx, t, farSide...)
	for _, s := range append([]*cluster.Server{bridge}, leaderSide...) {
		info, view := raftView(ctx, s)
		if info == nil || info.GetLeaderId() != leader.ID() {
			t.Errorf("across the bridge %s: %s, want leader %s", bridge, view, leader)
		}
	}
	// The leader, its half and the bridge are a majority: it commits.
	j := writeJob(ctx, t, leader)
	for _, s := range farSide {
		requireJob(ctx, t, s, j, false)
	}
	c.Heal()
	c.WaitConverged(ctx, c.Servers()...)
	c.WaitLeader(ctx)
}

// TestPartitionOneWay cuts one direction between the leader and a
// follower, then the other: only the namespace on the receiving end of
// the cut drops packets, and in both cases the follower stops hearing from
// the leader (TCP needs both directions) while the leader keeps a majority
// with the third server.
func TestPartitionOneWay(t *testing.T) {
	c := newNetnsCluster(t, 3)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	waitRecorded(ctx, t, c)
	f := c.Others(leader)[0]

	for _, reverse := range []bool{false, true} {
		cut := struct{ from, to *cluster.Server }{leader, f}
		if reverse {
			cut.from, cut.to = f, leader
		}
		sender, receiver := droppedFromPeers(t, cut.from), droppedFromPeers(t, cut.to)
		c.CutOneWay(cut.from, cut.to)
		waitLeaderless(ctx, t, f)
		poll(ctx, t, cut.to.ID()+" dropping packets of "+cut.from.ID(), func() (bool, string) {
			n := droppedFromPeers(t, cut.to)
			return n > receiver, fmt.Sprintf("InAddrErrors %d, %d before the cut", n, receiver)
		})
		if n := droppedFromPeers(t, cut.from); n != sender {
			t.Errorf("%s -> %s cut: the sender %s dropped packets too (InAddrErrors %d, %d before)", cut.from, cut.to, cut.from, n, sender)
		}
		j := writeJob(ctx, t, leader)
		if info, view := raftView(ctx, leader); info == nil || info.GetRaftState() != droverv1.RaftState_RAFT_STATE_LEADER {
			t.Errorf("%s -> %s cut: %s, want it still the leader", cut.from, cut.to, view)
		}
		c.Heal()
		c.WaitConverged(ctx, c.Servers()...)
		requireJob(ctx, t, f, j, true)
		leader = c.WaitLeader(ctx)
		if leader == f {
			t.Fatalf("%s, cut off from the leader, became the leader", f)
		}
	}
}

// TestNetnsParentDies kills, with SIGKILL, a test process that runs a
// server in a network namespace, as a go test timeout or a crash would:
// the server dies with it (its parent-death signal survives ip netns
// exec), and the next cluster started with Netns removes the namespace,
// veth and bridge that the dead process could not.
func TestNetnsParentDies(t *testing.T) {
	if os.Getenv(childBinEnv) != "" {
		runDoomedChild(t)
		return
	}
	ctx := testContext(t)
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNetnsParentDies$", "-test.v", "-test.timeout=2m")
	child.Env = append(os.Environ(), childBinEnv+"="+droverBin)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = child.Stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var waited bool
	t.Cleanup(func() {
		if !waited {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	var (
		pid       int
		left      cluster.Network
		ns, prefx string
		output    []string
	)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		output = append(output, line)
		if _, err := fmt.Sscanf(line, "doomed child: pid %d netns %s bridge %s subnet %s", &pid, &ns, &left.Bridge, &prefx); err == nil {
			break
		}
	}
	if pid == 0 {
		_ = child.Wait()
		waited = true
		if text := strings.Join(output, "\n"); strings.Contains(text, "--- SKIP") {
			t.Skipf("the child skipped:\n%s", text)
		} else {
			t.Fatalf("the child started no server:\n%s", text)
		}
	}
	left.Namespaces = []string{ns}
	if left.Subnet, err = netip.ParsePrefix(prefx); err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(droverBin)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || exe != want {
		t.Fatalf("the child's server, process %d, runs %s (%v), want %s", pid, exe, err, want)
	}
	// Should it survive its parent after all, it must not survive the test.
	t.Cleanup(func() {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == want {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	waited = true
	poll(within(t, ctx, 30*time.Second), t, fmt.Sprintf("server process %d dead", pid), func() (bool, string) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true, "" // gone
		}
		// pid (comm) state ...: a zombie is dead too.
		i := strings.LastIndexByte(string(data), ')')
		return i > 0 && i+2 < len(data) && data[i+2] == 'Z', "still running: " + string(data)
	})
	if !slices.Contains(namespaces(t), ns) {
		t.Fatalf("the dead child's namespace %s is not there to clean up", ns)
	}

	newNetnsCluster(t, 1, cluster.Bootstrap())
	requireNetworkGone(t, left)
}

// runDoomedChild is TestNetnsParentDies in the child: start a server,
// tell the parent about it, and wait to be killed.
func runDoomedChild(t *testing.T) {
	c := cluster.New(t, droverBin, 1, cluster.Netns(), cluster.Bootstrap())
	s, w := c.Server(1), c.Network()
	fmt.Printf("doomed child: pid %d netns %s bridge %s subnet %s\n", s.Pid(), s.Netns(), w.Bridge, w.Subnet)
	select {
	case <-time.After(time.Minute):
		t.Fatal("the parent did not kill this process within a minute")
	case <-t.Context().Done():
	}
}
