package cluster

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

const (
	// DefaultWait bounds the Wait methods when their context has no
	// deadline.
	DefaultWait = time.Minute
	// pollInterval is how often the Wait methods poll.
	pollInterval = 50 * time.Millisecond
	// callTimeout bounds each RPC of a poll.
	callTimeout = 2 * time.Second
	// logTailLines is how much of each server's log a failure shows.
	logTailLines = 200
)

// defaultArgs are given to every server before the options' flags (a flag
// given twice takes the last value, so options can override them).
var defaultArgs = []string{
	"-log-format", "json",
	"-log-level", "debug",
	// Tests register nodes that never heartbeat; they must not turn down
	// (and cause raft writes and evaluations) in the middle of a test.
	"-heartbeat-min-ttl", "1h",
}

// Option adjusts how servers are started.
type Option func(*options)

type mode int

const (
	modeBootstrapExpect mode = iota
	modeBootstrap
	modeDev
)

type options struct {
	args        []string
	mode        mode
	noServerID  bool
	beforeStart func(*Server)
	// serverArgs are flags for one server of New, by its number (1 is s1).
	serverArgs map[int][]string
	// bin, if set, is the binary of the servers AddServer adds; serverBins
	// that of one server of New, by its number.
	bin        string
	serverBins map[int]string
	tls        bool
	acl        bool
	certs      *testcerts.Set // TLSCerts; nil: New writes new ones
	netns      bool
	// tmpfs are the sizes of tmpfs data dirs by server number; 0 is every
	// server (TmpfsDataDir).
	tmpfs map[int]int64
	// dial is added to the harness's own connections (TLS credentials).
	dial []grpc.DialOption
}

// Args adds flags to the servers' command line.
func Args(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// Snapshots sets raft's snapshot threshold, snapshot check interval and
// trailing logs.
func Snapshots(threshold int, interval time.Duration, trailingLogs int) Option {
	return Args("-snapshot-threshold", strconv.Itoa(threshold), "-snapshot-interval", interval.String(),
		"-trailing-logs", strconv.Itoa(trailingLogs))
}

// Autopilot sets autopilot's server stabilization time and the time after
// which a failed server is removed, and makes autopilot measure and decide
// every 250ms so that tests need not wait out its production intervals.
func Autopilot(stabilization, deadServerAfter time.Duration) Option {
	return Args("-server-stabilization-time", stabilization.String(), "-dead-server-after", deadServerAfter.String(),
		"-autopilot-update-interval", "250ms", "-autopilot-reconcile-interval", "250ms")
}

// Bootstrap starts single servers that bootstrap themselves (-bootstrap)
// instead of forming a cluster with -bootstrap-expect and -join. Use it
// with New(t, bin, 1).
func Bootstrap() Option { return func(o *options) { o.mode = modeBootstrap } }

// Dev starts servers with -dev: no -data-dir (the server makes a
// temporary one, see Server.Info), no -bootstrap-expect or -join. Use it
// with New(t, bin, 1).
func Dev() Option { return func(o *options) { o.mode = modeDev } }

// ServerIDFromDataDir leaves out -server-id, so the server takes the id
// stored in its data dir (or makes one). Server.ID is then learned from the
// info file of the first start and checked on every restart.
func ServerIDFromDataDir() Option { return func(o *options) { o.noServerID = true } }

// ServerArgs adds flags to the command line of server sN of New only (n
// counts from 1), after the flags given to all.
func ServerArgs(n int, args ...string) Option {
	return func(o *options) {
		if o.serverArgs == nil {
			o.serverArgs = make(map[int][]string)
		}
		o.serverArgs[n] = append(o.serverArgs[n], args...)
	}
}

// ServerBinary runs server sN of New (n counts from 1) from bin instead of
// the cluster's binary, e.g. one built by BuildVersion as another release.
func ServerBinary(n int, bin string) Option {
	return func(o *options) {
		if o.serverBins == nil {
			o.serverBins = make(map[int]string)
		}
		o.serverBins[n] = bin
	}
}

// Binary runs the server AddServer adds from bin instead of the cluster's
// binary.
func Binary(bin string) Option { return func(o *options) { o.bin = bin } }

// BeforeFirstStart calls f for each server before its process is first
// started, e.g. to seed its data dir.
func BeforeFirstStart(f func(*Server)) Option { return func(o *options) { o.beforeStart = f } }

// Cluster is a set of drover server processes.
type Cluster struct {
	t    testing.TB
	bin  string
	dir  string
	opts options

	certs     *testcerts.Set      // with TLS
	clientTLS *tlsconfig.Reloader // with TLS: the harness's identity
	token     harnessToken        // with ACL

	net *network // with Netns

	mu      sync.Mutex
	servers []*Server
	closers []func() error
	crashes []string
	mounts  []string // data dirs with a tmpfs of the harness mounted

	// netMu orders changes of the cuts, which it guards.
	netMu sync.Mutex
	cuts  cutSet
}

// New starts n servers and waits until each serves gRPC (it does not wait
// for a leader: see WaitLeader). Each server sN gets -data-dir <tmp>/sN,
// -server-id sN, its own -rpc-addr and -raft-addr (the same for the whole
// test; loopback ports, or its namespace's address with Netns),
// -bootstrap-expect n, -join with the other servers' gRPC
// addresses, -info-file, JSON debug logs into <tmp>/sN.log, and the flags of
// the options. The processes are killed when the test ends.
func New(t testing.TB, bin string, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("cluster.New: %d servers", n)
	}
	c := &Cluster{t: t, bin: bin, dir: t.TempDir()}
	for _, o := range opts {
		o(&c.opts)
	}
	if c.opts.tls {
		c.setupTLS()
	}
	if c.opts.acl {
		c.setupACL()
	}
	if c.opts.mode != modeBootstrapExpect && n != 1 {
		t.Fatalf("cluster.New: -bootstrap and -dev start single servers, not %d", n)
	}
	// The cleanup runs before t.TempDir's, so the logs are still there.
	t.Cleanup(c.cleanup)
	if c.opts.netns {
		c.openNetwork()
	}

	servers := make([]*Server, n)
	for i := range n {
		servers[i] = c.newServer(i+1, c.opts)
		if bin := c.opts.serverBins[i+1]; bin != "" {
			servers[i].bin = bin
		}
	}
	for i, s := range servers {
		var join []string
		for j, o := range servers {
			if j != i {
				join = append(join, o.rpcAddr)
			}
		}
		switch c.opts.mode {
		case modeBootstrapExpect:
			s.args = append(s.args, "-bootstrap-expect", strconv.Itoa(n))
			if len(join) > 0 {
				s.args = append(s.args, "-join", strings.Join(join, ","))
			}
		case modeBootstrap:
			s.args = append(s.args, "-bootstrap")
		case modeDev:
			s.args = append(s.args, "-dev")
		}
		s.args = append(s.args, c.opts.args...)
		s.args = append(s.args, c.opts.serverArgs[i+1]...)
	}
	c.mu.Lock()
	c.servers = servers
	c.mu.Unlock()
	for _, s := range servers {
		if c.opts.beforeStart != nil {
			c.opts.beforeStart(s)
		}
		s.start()
	}
	// Start all before waiting for any: a server may wait for its peers.
	for _, s := range servers {
		s.waitStarted()
	}
	t.Logf("cluster: started %d servers in %s", n, c.dir)
	return c
}

// AddServer starts one more server that joins the cluster through the
// existing servers (-join with their gRPC addresses, no -bootstrap-expect),
// with the cluster's flags plus those of opts, and waits until it serves
// gRPC.
func (c *Cluster) AddServer(opts ...Option) *Server {
	c.t.Helper()
	o := c.opts
	o.args = slices.Clone(o.args)
	o.beforeStart = nil
	o.bin = ""
	for _, f := range opts {
		f(&o)
	}
	existing := c.Servers()
	s := c.newServer(len(existing)+1, o)
	if o.bin != "" {
		s.bin = o.bin
	}
	var join []string
	for _, e := range existing {
		join = append(join, e.rpcAddr)
	}
	s.args = append(s.args, "-join", strings.Join(join, ","))
	s.args = append(s.args, o.args...)
	c.mu.Lock()
	c.servers = append(c.servers, s)
	c.mu.Unlock()
	if o.beforeStart != nil {
		o.beforeStart(s)
	}
	s.start()
	s.waitStarted()
	c.t.Logf("cluster: added %s", s)
	return s
}

func (c *Cluster) newServer(i int, o options) *Server {
	name := "s" + strconv.Itoa(i)
	rpcAddr, raftAddr, ns := c.placeServer(name, i)
	s := &Server{
		c:        c,
		bin:      c.bin,
		name:     name,
		rpcAddr:  rpcAddr,
		raftAddr: raftAddr,
		netns:    ns,
		infoFile: filepath.Join(c.dir, name+".info.json"),
		logFile:  filepath.Join(c.dir, name+".log"),
	}
	if !o.noServerID {
		s.id = name
	}
	s.args = []string{"server"}
	if o.mode != modeDev {
		s.dataDir = filepath.Join(c.dir, name)
		s.args = append(s.args, "-data-dir", s.dataDir)
		if size := o.tmpfsSize(i); size > 0 {
			c.mountDataDir(s, size)
		}
	}
	if !o.noServerID {
		s.args = append(s.args, "-server-id", s.id)
	}
	s.args = append(s.args, "-rpc-addr", s.rpcAddr, "-raft-addr", s.raftAddr, "-info-file", s.infoFile)
	s.args = append(s.args, defaultArgs...)
	conn, err := dial(s.rpcAddr, o.dial...)
	if err != nil {
		c.t.Fatalf("dial %s: %v", s.rpcAddr, err)
	}
	s.conn = conn
	c.addCloser(conn.Close)
	return s
}

// dial connects to addr as every drover client does
// (rpc.ClientDialOptions: drover's codec, refused calls asked again).
// Reconnection backs off to at most half a second, so a restarted server
// is reachable again at once. opts come after the defaults and win over
// them (e.g. TLS credentials instead of plaintext).
func dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, append(append(rpc.ClientDialOptions(nil),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: 2 * time.Second,
		})), opts...)...)
}

func (c *Cluster) addCloser(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closers = append(c.closers, f)
}

// Servers returns every server of the cluster, in the order they were
// added (s1, s2, ...), running or not.
func (c *Cluster) Servers() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.servers)
}

// Server returns server sN (1-based, as in the ids).
func (c *Cluster) Server(n int) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[n-1]
}

// Others returns the servers of the cluster other than those given.
func (c *Cluster) Others(except ...*Server) []*Server {
	var out []*Server
	for _, s := range c.Servers() {
		if !slices.Contains(except, s) {
			out = append(out, s)
		}
	}
	return out
}

// Live returns the servers whose process is running and not paused.
func (c *Cluster) Live() []*Server {
	return live(c.Servers())
}

func live(servers []*Server) []*Server {
	var out []*Server
	for _, s := range servers {
		if s.Running() && !s.Paused() {
			out = append(out, s)
		}
	}
	return out
}

// noteCrash records a process that exited without the harness asking.
func (c *Cluster) noteCrash(s *Server, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashes = append(c.crashes, fmt.Sprintf("%s exited unexpectedly: %v", s, err))
}

// CheckCrashes fails the test if a server exited without being stopped or
// killed by the harness. The Wait methods call it on every poll.
func (c *Cluster) CheckCrashes() {
	c.t.Helper()
	c.mu.Lock()
	crashes := slices.Clone(c.crashes)
	c.mu.Unlock()
	if len(crashes) > 0 {
		c.t.Fatalf("%s", strings.Join(crashes, "\n"))
	}
}

// cleanup kills every process, closes connections, and on failure writes
// the tail of every server's log into the test log.
func (c *Cluster) cleanup() {
	c.mu.Lock()
	servers := slices.Clone(c.servers)
	closers := c.closers
	c.closers = nil
	c.mu.Unlock()
	for _, s := range servers {
		s.mu.Lock()
		running, cmd, done := s.running, s.cmd, s.done
		if running {
			s.expected = true
		}
		s.mu.Unlock()
		if !running {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process is killed just as well, but be tidy
		_ = cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(killTimeout):
			c.t.Errorf("%s did not exit within %s of SIGKILL", s, killTimeout)
		}
	}
	for _, f := range closers {
		_ = f()
	}
	// After the connections: nothing dials the servers' addresses any more.
	c.closeNetwork()
	c.unmountAll()
	c.mu.Lock()
	crashes := c.crashes
	c.mu.Unlock()
	for _, msg := range crashes {
		c.t.Errorf("%s", msg)
	}
	if c.t.Failed() {
		for _, s := range servers {
			c.t.Logf("%s", s.tail(logTailLines))
		}
	}
}

// withDefault bounds ctx by DefaultWait when it has no deadline.
func withDefault(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultWait)
}

// each calls f on every server concurrently and returns the results in
// order.
func each[T any](ctx context.Context, servers []*Server, f func(context.Context, *Server) (T, error)) ([]T, []error) {
	out := make([]T, len(servers))
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			out[i], errs[i] = f(cctx, s)
		})
	}
	wg.Wait()
	return out, errs
}

// wait polls check until it returns true or ctx ends; then it fails the
// test with what and check's last explanation.
func (c *Cluster) wait(ctx context.Context, what string, check func(context.Context) (bool, string)) {
	c.t.Helper()
	ctx, cancel := withDefault(ctx)
	defer cancel()
	start := time.Now()
	last := ""
	for {
		c.CheckCrashes()
		ok, why := check(ctx)
		if ok {
			c.t.Logf("cluster: %s after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		last = why
		select {
		case <-ctx.Done():
			c.t.Fatalf("cluster: not %s after %s: %s", what, time.Since(start).Round(time.Millisecond), last)
		case <-time.After(pollInterval):
		}
	}
}

// WaitLeader waits until the running, unpaused servers among the given ones
// (all servers if none are given) answer ClusterService.Info and agree on a
// leader that is one of them and reports itself LEADER. It returns the
// leader.
func (c *Cluster) WaitLeader(ctx context.Context, among ...*Server) *Server {
	c.t.Helper()
	if len(among) == 0 {
		among = c.Servers()
	}
	var leader *Server
	c.wait(ctx, "agreed on a leader", func(ctx context.Context) (bool, string) {
		servers := live(among)
		if len(servers) == 0 {
			return false, "no server of " + names(among) + " is running and unpaused"
		}
		infos, errs := each(ctx, servers, func(ctx context.Context, s *Server) (*droverv1.ServerInfoResponse, error) {
			return droverv1.NewClusterServiceClient(s.Conn()).Info(ctx, &droverv1.ServerInfoRequest{})
		})
		var views []string
		leaderID := ""
		agree := true
		for i, s := range servers {
			if errs[i] != nil {
				views = append(views, fmt.Sprintf("%s: %v", s, errs[i]))
				agree = false
				continue
			}
			in := infos[i]
			views = append(views, fmt.Sprintf("%s: %s, leader %q, term %d, index %d", s, in.GetRaftState(), in.GetLeaderId(), in.GetLastTerm(), in.GetLastIndex()))
			if in.GetLeaderId() == "" || leaderID != "" && in.GetLeaderId() != leaderID {
				agree = false
			}
			if leaderID == "" {
				leaderID = in.GetLeaderId()
			}
		}
		why := strings.Join(views, "; ")
		if !agree {
			return false, why
		}
		i := slices.IndexFunc(servers, func(s *Server) bool { return s.ID() == leaderID })
		if i < 0 {
			return false, fmt.Sprintf("leader %q is not one of %s: %s", leaderID, names(servers), why)
		}
		if infos[i].GetRaftState() != droverv1.RaftState_RAFT_STATE_LEADER {
			return false, fmt.Sprintf("leader %q does not report LEADER: %s", leaderID, why)
		}
		leader = servers[i]
		return true, why
	})
	c.t.Logf("cluster: leader is %s", leader)
	return leader
}

// WaitConverged waits until the given servers (all running, unpaused
// servers if none are given) report through OperatorService.StateDigest the
// same applied index and identical digests of every table. It fails the test
// with the differing digests if they do not converge before ctx ends.
func (c *Cluster) WaitConverged(ctx context.Context, servers ...*Server) {
	c.t.Helper()
	if len(servers) == 0 {
		servers = c.Live()
	}
	c.wait(ctx, "converged: "+names(servers), func(ctx context.Context) (bool, string) {
		digests, errs := each(ctx, servers, func(ctx context.Context, s *Server) (*droverv1.StateDigestResponse, error) {
			return droverv1.NewOperatorServiceClient(s.Conn()).StateDigest(ctx, &droverv1.StateDigestRequest{})
		})
		for i, err := range errs {
			if err != nil {
				return false, fmt.Sprintf("%s: %v", servers[i], err)
			}
		}
		return digestsAgree(servers, digests)
	})
}

// digestsAgree compares the digests and describes the differences.
func digestsAgree(servers []*Server, digests []*droverv1.StateDigestResponse) (bool, string) {
	same := true
	var b strings.Builder
	b.WriteString("indexes:")
	for i, d := range digests {
		fmt.Fprintf(&b, " %s=%d", servers[i], d.GetIndex())
		if d.GetIndex() != digests[0].GetIndex() {
			same = false
		}
	}
	tables := map[string]bool{}
	for _, d := range digests {
		for name := range d.GetTables() {
			tables[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		differ := false
		for _, d := range digests {
			v, ok := d.GetTables()[name]
			w, wok := digests[0].GetTables()[name]
			if v != w || ok != wok {
				differ = true
			}
		}
		if !differ {
			continue
		}
		same = false
		fmt.Fprintf(&b, "\n  table %s differs:", name)
		for i, d := range digests {
			v, ok := d.GetTables()[name]
			if !ok {
				v = "(missing)"
			}
			fmt.Fprintf(&b, " %s=%s", servers[i], v)
		}
	}
	if len(tables) == 0 {
		return false, b.String() + "; no tables reported"
	}
	return same, b.String()
}

// WaitHealthy waits until OperatorService.ServerMembers, asked of any
// running, unpaused server, reports the cluster healthy with exactly voters
// voters, each of them healthy.
func (c *Cluster) WaitHealthy(ctx context.Context, voters int) {
	c.t.Helper()
	c.wait(ctx, fmt.Sprintf("healthy with %d voters", voters), func(ctx context.Context) (bool, string) {
		servers := c.Live()
		if len(servers) == 0 {
			return false, "no server is running and unpaused"
		}
		var why []string
		for _, s := range servers {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			resp, err := droverv1.NewOperatorServiceClient(s.Conn()).ServerMembers(cctx, &droverv1.ServerMembersRequest{})
			cancel()
			if err != nil {
				why = append(why, fmt.Sprintf("%s: %v", s, err))
				continue
			}
			desc := describeMembers(resp)
			n, allHealthy := 0, true
			for _, m := range resp.GetServers() {
				if m.GetVoter() {
					n++
					allHealthy = allHealthy && m.GetHealthy()
				}
			}
			return resp.GetHealthy() && n == voters && allHealthy, fmt.Sprintf("asked %s: %s", s, desc)
		}
		return false, strings.Join(why, "; ")
	})
}

func describeMembers(resp *droverv1.ServerMembersResponse) string {
	var parts []string
	for _, m := range resp.GetServers() {
		p := fmt.Sprintf("%s(voter=%v healthy=%v %s", m.GetId(), m.GetVoter(), m.GetHealthy(), m.GetRaftState())
		if m.GetError() != "" {
			p += " error=" + strconv.Quote(m.GetError())
		}
		parts = append(parts, p+")")
	}
	sort.Strings(parts)
	return fmt.Sprintf("healthy=%v leader=%q failure_tolerance=%d servers=[%s]", resp.GetHealthy(), resp.GetLeaderId(),
		resp.GetFailureTolerance(), strings.Join(parts, " "))
}

func names(servers []*Server) string {
	var ids []string
	for _, s := range servers {
		ids = append(ids, s.ID())
	}
	return "[" + strings.Join(ids, " ") + "]"
}

// Dir returns the cluster's temporary directory (data dirs, logs, info
// files); it is removed when the test ends.
func (c *Cluster) Dir() string { return c.dir }
