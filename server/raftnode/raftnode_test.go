package raftnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// testFSM records applied entries; it snapshots them as JSON.
type testFSM struct {
	mu         sync.Mutex
	entries    []string
	applyCalls int
	restores   int
	restoreErr error // returned by Restore when set
}

func (f *testFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, string(l.Data))
	f.applyCalls++
	return l.Index
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return testSnapshot(slices.Clone(f.entries)), nil
}

func (f *testFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if f.restoreErr != nil {
		return f.restoreErr
	}
	var entries []string
	if err := json.NewDecoder(rc).Decode(&entries); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = entries
	f.restores++
	return nil
}

func (f *testFSM) state() (entries []string, applyCalls, restores int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries), f.applyCalls, f.restores
}

type testSnapshot []string

func (s testSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s testSnapshot) Release() {}

func testConfig(t *testing.T, dir string, fsm raft.FSM) Config {
	t.Helper()
	return Config{
		ServerID:  "server-1",
		DataDir:   dir,
		BindAddr:  "127.0.0.1:0",
		FSM:       fsm,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
		Bootstrap: true,
	}
}

// startNode creates a node that is shut down when the test ends.
func startNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return n
}

func waitLeader(t *testing.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		select {
		case isLeader := <-n.LeaderNotify():
			if isLeader {
				return
			}
		case <-ctx.Done():
			t.Fatalf("%s did not become leader: %v (state %s)", n.Addr(), ctx.Err(), n.Raft().State())
		}
	}
}

func apply(t *testing.T, n *Node, data ...string) {
	t.Helper()
	for _, d := range data {
		if err := n.Raft().Apply([]byte(d), 5*time.Second).Error(); err != nil {
			t.Fatalf("Apply %q: %v", d, err)
		}
	}
}

// barrier waits until every committed entry has reached the FSM.
func barrier(t *testing.T, n *Node) {
	t.Helper()
	if err := n.Raft().Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("Barrier: %v", err)
	}
}

func stat(t *testing.T, n *Node, key string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(n.Raft().Stats()[key], 10, 64)
	if err != nil {
		t.Fatalf("raft stat %s: %v", key, err)
	}
	return v
}

// assertUnlocked checks that raft.db's bolt file lock is free by taking it.
func assertUnlocked(t *testing.T, dataDir string) {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(dataDir, "raft", "raft.db"), 0o600, &bbolt.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("raft.db still locked: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close raft.db: %v", err)
	}
}

func TestSingleServerBootstrapBecomesLeader(t *testing.T) {
	t.Parallel()
	fsm := &testFSM{}
	dir := t.TempDir()
	n := startNode(t, testConfig(t, dir, fsm))
	waitLeader(t, n)

	host, port, err := net.SplitHostPort(string(n.Addr()))
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr() = %q (%v), want 127.0.0.1 with the real port", n.Addr(), err)
	}
	cf := n.Raft().GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatalf("GetConfiguration: %v", err)
	}
	want := []raft.Server{{Suffrage: raft.Voter, ID: "server-1", Address: n.Addr()}}
	if got := cf.Configuration().Servers; !slices.Equal(got, want) {
		t.Fatalf("configuration = %+v, want %+v", got, want)
	}

	// Concurrent Applies exercise the batched apply channel.
	const count = 50
	var wg sync.WaitGroup
	errs := make(chan error, count)
	for i := range count {
		wg.Go(func() {
			errs <- n.Raft().Apply(fmt.Appendf(nil, "e%d", i), 5*time.Second).Error()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	entries, _, _ := fsm.state()
	if len(entries) != count {
		t.Fatalf("FSM has %d entries, want %d", len(entries), count)
	}

	for _, p := range []string{"raft/raft.db", "raft/snapshots"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("expected %s: %v", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "raft")); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Errorf("raft dir mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestRestartReplaysLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n1, err := New(testConfig(t, dir, &testFSM{}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = n1.Shutdown() })
	waitLeader(t, n1)
	want := []string{"a", "b", "c", "d", "e"}
	apply(t, n1, want...)
	addr, termBefore := n1.Addr(), stat(t, n1, "term")
	if err := n1.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	fsm := &testFSM{}
	cfg := testConfig(t, dir, fsm)
	cfg.BindAddr = string(addr) // keep the address recorded in the configuration
	n2 := startNode(t, cfg)     // Bootstrap is still true: must be ignored, state exists
	if n2.Addr() != addr {
		t.Fatalf("Addr() = %q after restart, want %q", n2.Addr(), addr)
	}
	waitLeader(t, n2)
	barrier(t, n2)

	// A re-bootstrap would have reset the term to 1; instead the restarted
	// server continued from the persisted term. (GetConfiguration().Index() is
	// always 0 in raft v1.7.3, so it cannot be used to see this.)
	if term := stat(t, n2, "term"); term <= termBefore {
		t.Fatalf("term after restart %d, want > %d", term, termBefore)
	}
	var first raft.Log
	if err := n2.store.GetLog(1, &first); err != nil || first.Type != raft.LogConfiguration || first.Term != 1 {
		t.Fatalf("log entry 1 = %+v (%v), want the original bootstrap configuration", first, err)
	}
	entries, _, restores := fsm.state()
	if !slices.Equal(entries, want) || restores != 0 {
		t.Fatalf("FSM after restart = %q (restores %d), want %q from the log", entries, restores, want)
	}
}

func TestRestartRestoresSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, &testFSM{})
	cfg.SnapshotThreshold = 1 << 20 // only the forced snapshot below
	n1, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = n1.Shutdown() })
	waitLeader(t, n1)
	apply(t, n1, "a", "b", "c")
	if err := n1.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	apply(t, n1, "d", "e")
	addr := n1.Addr()
	if err := n1.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	fsm := &testFSM{}
	cfg.FSM = fsm
	cfg.BindAddr = string(addr)
	n2 := startNode(t, cfg)
	// NewRaft restores the snapshot before returning.
	if entries, _, restores := fsm.state(); restores != 1 || !slices.Equal(entries[:3], []string{"a", "b", "c"}) {
		t.Fatalf("after New: FSM = %q, restores %d; want snapshot [a b c] restored", entries, restores)
	}
	waitLeader(t, n2)
	barrier(t, n2)
	entries, applyCalls, restores := fsm.state()
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(entries, want) {
		t.Fatalf("FSM = %q, want %q", entries, want)
	}
	if applyCalls != 2 || restores != 1 {
		t.Fatalf("applyCalls %d restores %d, want 2 logs applied on top of 1 restore", applyCalls, restores)
	}
}

func TestNoBootstrapStaysFollower(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, &testFSM{})
	cfg.Bootstrap = false
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })

	if s := n.Raft().State(); s != raft.Follower {
		t.Fatalf("state = %s, want Follower", s)
	}
	cf := n.Raft().GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatalf("GetConfiguration: %v", err)
	}
	if servers := cf.Configuration().Servers; len(servers) != 0 {
		t.Fatalf("configuration = %+v, want empty: a server without a configuration can never elect itself", servers)
	}
	if addr, id := n.Raft().LeaderWithID(); addr != "" || id != "" {
		t.Fatalf("leader = %s/%s, want none", addr, id)
	}
	select {
	case v := <-n.LeaderNotify():
		t.Fatalf("unexpected leadership notification %v", v)
	default:
	}

	// Nothing was persisted, so a later start with Bootstrap does bootstrap.
	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	cfg.Bootstrap = true
	waitLeader(t, startNode(t, cfg))
}

func TestShutdownIdempotentAndReleasesResources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNode(t, testConfig(t, dir, &testFSM{}))

	_, err := bbolt.Open(filepath.Join(dir, "raft", "raft.db"), 0o600, &bbolt.Options{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, berrors.ErrTimeout) {
		t.Fatalf("opening raft.db while the node runs: %v, want a lock timeout", err)
	}

	for i := range 3 {
		if err := n.Shutdown(); err != nil {
			t.Fatalf("Shutdown #%d: %v", i+1, err)
		}
	}
	assertUnlocked(t, dir)
	ln, err := net.Listen("tcp", string(n.Addr()))
	if err != nil {
		t.Fatalf("transport address still in use after Shutdown: %v", err)
	}
	_ = ln.Close()
}

func TestNewCleansUpOnError(t *testing.T) {
	t.Parallel()

	t.Run("transport", func(t *testing.T) {
		t.Parallel()
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = busy.Close() })
		dir := t.TempDir()
		cfg := testConfig(t, dir, &testFSM{})
		cfg.BindAddr = busy.Addr().String()
		if n, err := New(cfg); err == nil {
			_ = n.Shutdown()
			t.Fatal("New on a busy address succeeded")
		} else if !strings.Contains(err.Error(), cfg.BindAddr) {
			t.Errorf("error %q does not name the address", err)
		}
		assertUnlocked(t, dir) // bolt was opened before the transport failed
	})

	t.Run("raft", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cfg := testConfig(t, dir, &testFSM{})
		n1, err := New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = n1.Shutdown() })
		waitLeader(t, n1)
		apply(t, n1, "a")
		if err := n1.Raft().Snapshot().Error(); err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		addr := n1.Addr()
		if err := n1.Shutdown(); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}

		// NewRaft fails when no snapshot can be restored, after bolt and the
		// transport are open.
		cfg.FSM = &testFSM{restoreErr: errors.New("corrupt")}
		cfg.BindAddr = string(addr)
		if n, err := New(cfg); err == nil {
			_ = n.Shutdown()
			t.Fatal("New with a failing FSM restore succeeded")
		}
		assertUnlocked(t, dir)
		ln, err := net.Listen("tcp", string(addr))
		if err != nil {
			t.Fatalf("transport listener leaked: %v", err)
		}
		_ = ln.Close()
	})

	t.Run("data dir in use", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		startNode(t, testConfig(t, dir, &testFSM{}))
		cfg := testConfig(t, dir, &testFSM{})
		cfg.ServerID = "server-2"
		n, err := New(cfg)
		if err == nil {
			_ = n.Shutdown()
			t.Fatal("second node on the same data dir succeeded")
		}
		if !errors.Is(err, berrors.ErrTimeout) || !strings.Contains(err.Error(), "server-2") {
			t.Fatalf("error %q: want a wrapped bolt lock timeout naming server-2", err)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*Config){
		"no server id":            func(c *Config) { c.ServerID = "" },
		"no data dir":             func(c *Config) { c.DataDir = "" },
		"no fsm":                  func(c *Config) { c.FSM = nil },
		"unspecified bind":        func(c *Config) { c.BindAddr = "0.0.0.0:0" },
		"empty bind host":         func(c *Config) { c.BindAddr = ":0" },
		"bad bind":                func(c *Config) { c.BindAddr = "127.0.0.1" },
		"unspecified advertise":   func(c *Config) { c.AdvertiseAddr = "0.0.0.0:4651" },
		"too many append entries": func(c *Config) { c.MaxAppendEntries = 2048 },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := testConfig(t, dir, &testFSM{})
			mutate(&cfg)
			if n, err := New(cfg); err == nil {
				_ = n.Shutdown()
				t.Fatal("New succeeded")
			}
			// Config errors are caught before anything is created on disk.
			if _, err := os.Stat(filepath.Join(dir, "raft")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("raft dir exists after config error: %v", err)
			}
		})
	}
}

func TestAdvertiseAddr(t *testing.T) {
	t.Parallel()

	t.Run("fixed", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t, t.TempDir(), &testFSM{})
		cfg.Bootstrap = false
		cfg.AdvertiseAddr = "127.0.0.2:7000"
		if got := startNode(t, cfg).Addr(); got != "127.0.0.2:7000" {
			t.Fatalf("Addr() = %q, want 127.0.0.2:7000", got)
		}
	})

	t.Run("port 0 takes the bound port", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t, t.TempDir(), &testFSM{})
		cfg.AdvertiseAddr = "127.0.0.1:0"
		n := startNode(t, cfg)
		host, port, err := net.SplitHostPort(string(n.Addr()))
		if err != nil || host != "127.0.0.1" || port == "0" {
			t.Fatalf("Addr() = %q (%v), want 127.0.0.1 with the bound port", n.Addr(), err)
		}
		waitLeader(t, n) // the transport built on our own listener works
		apply(t, n, "x")
		conn, err := net.DialTimeout("tcp", string(n.Addr()), time.Second)
		if err != nil {
			t.Fatalf("dial advertised address: %v", err)
		}
		_ = conn.Close()
	})
}

func TestRaftConfigTimingMultiplier(t *testing.T) {
	def := raft.DefaultConfig()
	for _, m := range []int{0, 1, 3, 10} {
		rc := raftConfig(Config{ServerID: "s1", TimingMultiplier: m}, nil, nil)
		scale := time.Duration(max(m, 1))
		if rc.HeartbeatTimeout != def.HeartbeatTimeout*scale || rc.ElectionTimeout != def.ElectionTimeout*scale ||
			rc.LeaderLeaseTimeout != def.LeaderLeaseTimeout*scale {
			t.Errorf("multiplier %d: heartbeat %v election %v lease %v, want %dx the defaults", m,
				rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, scale)
		}
		if err := raft.ValidateConfig(rc); err != nil {
			t.Errorf("multiplier %d: %v", m, err)
		}
	}
}
