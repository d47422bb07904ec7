package test_test

import (
	"bufio"
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

	again := newNetnsCluster(t, 1, cluster.Bootstrap())
	if again.Network().Bridge == left.Bridge {
		// The new cluster took the dead child's slot (a 1 in 256 draw):
		// creating its bridge and namespace, which have the same names,
		// fails while the leftovers are there, so they were removed.
		t.Logf("the new cluster took the dead child's network slot (%s) and created it again", left.Bridge)
		return
	}
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
