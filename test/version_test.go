package test_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server/raftnode"
	"github.com/droverhq/drover/test/cluster"
)

// Releases of the mixed-version test: the cluster metadata entry type is
// new in the second.
const (
	oldRelease = "0.1.0"
	newRelease = "0.2.0"
)

// Log messages the test looks for.
const (
	logBehind      = "not writing the cluster metadata until every server runs a release that knows it; upgrade these servers"
	logMetaWritten = "cluster metadata written"
	logSkipped     = "skipping raft entry of unknown ignorable type"
	logHalted      = "stopped applying the raft log"
)

// TestRollingUpgradeWritesClusterMetadata runs real servers built as two
// releases. With one server on the older release the leader writes no
// cluster metadata and says which server is behind; once that server runs
// the newer binary, every server holds the same metadata. A server of the
// older release added afterwards skips the metadata entry with a warning
// and otherwise converges with the others.
func TestRollingUpgradeWritesClusterMetadata(t *testing.T) {
	dir := t.TempDir()
	oldBin, err := cluster.BuildVersion(dir, oldRelease)
	if err != nil {
		t.Fatal(err)
	}
	newBin, err := cluster.BuildVersion(dir, newRelease)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	c := cluster.New(t, newBin, 3, cluster.ServerBinary(3, oldBin))
	s3 := c.Server(3)
	leader := c.WaitLeader(ctx)
	if leader == s3 {
		// A leader of the older release has no metadata duty at all; the
		// test wants to read the newer leader's reasons.
		if _, err := droverv1.NewOperatorServiceClient(s3.Conn()).RaftTransferLeadership(ctx, &droverv1.RaftTransferLeadershipRequest{Id: "s1"}); err != nil {
			t.Fatal(err)
		}
		leader = c.WaitLeader(ctx)
	}
	n := mock.Node()
	retryUnavailable(ctx, t, "register a node", func(ctx context.Context) error {
		_, err := registerNode(ctx, leader.Conn(), n)
		return err
	})
	retryUnavailable(ctx, t, "register a job", func(ctx context.Context) error {
		_, err := registerJob(ctx, leader.Conn(), mock.Job(1), "version-test-job")
		return err
	})

	behind := s3.ID() + " (" + oldRelease + ")"
	if _, err := waitFor(ctx, "the leader to name the server behind", func() (map[string]any, bool, error) {
		rec, ok := leader.Logged(logBehind, "behind", behind, "needs", newRelease)
		return rec, ok, nil
	}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := leader.Logged(logBehind, "behind", behind); rec["level"] != "WARN" {
		t.Errorf("the leader's notice is at level %v, want WARN", rec["level"])
	}
	for _, s := range c.Servers() {
		if id := clusterID(ctx, t, s); id != "" {
			t.Errorf("%s holds cluster id %s while %s runs %s", s, id, s3, oldRelease)
		}
	}

	// Said once, not at every look: nothing woke the duty since.
	notices := 0
	for _, rec := range leader.LogRecords() {
		if rec["msg"] == logBehind && rec["behind"] == behind {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("the leader named %s as behind %d times, want once", behind, notices)
	}

	// Upgrade the server behind: the same data dir and flags, the newer
	// binary.
	s3.Stop()
	s3.SetBinary(newBin)
	s3.Restart()
	want, err := waitFor(ctx, "every server to hold one cluster id", func() (string, bool, error) {
		ids := map[string]bool{}
		var id string
		for _, s := range c.Servers() {
			id = clusterID(ctx, t, s)
			ids[id] = true
		}
		return id, len(ids) == 1 && id != "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(ctx)
	if _, ok := c.WaitLeader(ctx).Logged(logMetaWritten, "cluster_id", want); !ok {
		if _, ok := leader.Logged(logMetaWritten, "cluster_id", want); !ok {
			t.Errorf("no leader logged writing cluster id %s", want)
		}
	}
	// `server members` exits 1 while autopilot calls the cluster unhealthy,
	// as it may just after s3's restart.
	c.WaitHealthy(ctx, 3)
	members := runCLI(ctx, t, newBin, "server", "members", "-address", c.Server(1).RPCAddr())
	if !strings.Contains(members, "Cluster ID: "+want+"\n") {
		t.Errorf("server members does not show cluster id %s:\n%s", want, members)
	}
	var resp struct {
		ClusterID string `json:"cluster_id"`
		Servers   []struct {
			ID      string `json:"id"`
			Version string `json:"version"`
		} `json:"servers"`
	}
	if out := runCLI(ctx, t, newBin, "server", "members", "-json", "-address", c.Server(2).RPCAddr()); json.Unmarshal([]byte(out), &resp) != nil || resp.ClusterID != want {
		t.Errorf("server members -json: cluster id %q, want %s:\n%s", resp.ClusterID, want, out)
	}

	// A server of the older release joins a cluster whose log holds the
	// metadata entry: it skips the entry and converges otherwise.
	s4 := c.AddServer(cluster.Binary(oldBin))
	if _, err := waitFor(ctx, s4.String()+" to skip the metadata entry", func() (map[string]any, bool, error) {
		rec, ok := s4.Logged(logSkipped, "type", "ClusterMetadata", "version", oldRelease)
		return rec, ok, nil
	}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s4.Logged(logSkipped, "type", "ClusterMetadata"); rec["level"] != "WARN" {
		t.Errorf("%s skipped the entry at level %v, want WARN", s4, rec["level"])
	}
	if _, err := waitFor(ctx, s4.String()+" to converge but for the cluster metadata", func() (string, bool, error) {
		why, ok := convergedButMetadata(ctx, c.Servers())
		return why, ok, nil
	}); err != nil {
		why, _ := convergedButMetadata(ctx, c.Servers())
		t.Fatalf("%v: %s", err, why)
	}
	if id := clusterID(ctx, t, s4); id != "" {
		t.Errorf("%s of release %s holds cluster id %s", s4, oldRelease, id)
	}
	if _, ok := s4.Logged(logHalted); ok {
		t.Errorf("%s halted", s4)
	}
}

// clusterID asks s, through ClusterService.Info, for the cluster id its
// state holds.
func clusterID(ctx context.Context, t *testing.T, s *cluster.Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	info, err := droverv1.NewClusterServiceClient(s.Conn()).Info(ctx, &droverv1.ServerInfoRequest{})
	if err != nil {
		t.Fatalf("info of %s: %v", s, err)
	}
	return info.GetClusterId()
}

// convergedButMetadata reports whether the servers have applied the same
// index and agree on every table but the cluster metadata and the index
// table, which records that table's writes: a server of a release without
// cluster metadata lacks exactly those.
func convergedButMetadata(ctx context.Context, servers []*cluster.Server) (string, bool) {
	var first *droverv1.StateDigestResponse
	for _, s := range servers {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		d, err := droverv1.NewOperatorServiceClient(s.Conn()).StateDigest(cctx, &droverv1.StateDigestRequest{})
		cancel()
		if err != nil {
			return fmt.Sprintf("%s: %v", s, err), false
		}
		tables := maps.Clone(d.GetTables())
		delete(tables, "cluster_meta")
		delete(tables, "index")
		d.Tables = tables
		if first == nil {
			first = d
			continue
		}
		if d.GetIndex() != first.GetIndex() || !maps.Equal(d.GetTables(), first.GetTables()) {
			return fmt.Sprintf("%s: index %d tables %v; %s: index %d tables %v", s, d.GetIndex(), d.GetTables(), servers[0], first.GetIndex(), first.GetTables()), false
		}
	}
	return "", true
}

// runCLI runs the drover binary with args and returns its standard output.
func runCLI(ctx context.Context, t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("drover %s: %v\n%s", strings.Join(args, " "), err, exit.Stderr)
		}
		t.Fatalf("drover %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestServerExitsOnUnknownEntry writes into a stopped server's raft log an
// entry of a type below 128 that no release knows, as a newer release
// would: the restarted `drover server` stops applying at that entry, logs
// why at ERROR and exits non-zero naming the reason, however often it is
// started.
func TestServerExitsOnUnknownEntry(t *testing.T) {
	ctx := testContext(t)
	c := cluster.New(t, droverBin, 1, cluster.Bootstrap())
	s := c.Server(1)
	c.WaitLeader(ctx)
	retryUnavailable(ctx, t, "register a node", func(ctx context.Context) error {
		_, err := registerNode(ctx, s.Conn(), mock.Node())
		return err
	})
	s.Stop()
	index := appendRaftEntry(t, s.DataDir(), []byte{100, 1, 2, 3})

	for run := 1; run <= 2; run++ {
		err := s.RunToExit(time.Minute)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("run %d: exit %v, want status 1", run, err)
		}
		at := fmt.Sprint(index)
		rec, ok := s.Logged(logHalted, "index", at, "type", "MessageType(100)")
		if !ok || rec["level"] != "ERROR" || !strings.Contains(fmt.Sprint(rec["reason"]), "upgrade this server") {
			t.Errorf("run %d: halt log %v, want an ERROR at index %s saying to upgrade", run, rec, at)
		}
		if _, ok := s.Logged("this server stopped applying the raft log; shutting down"); !ok {
			t.Errorf("run %d: no log of the shutdown that follows the halt", run)
		}
		// The process's last words name the reason (stderr is in the log).
		log, err := os.ReadFile(s.LogFile())
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "error: server halted: stopped applying the raft log at index "+at) || !strings.Contains(last, "upgrade this server") {
			t.Errorf("run %d: last line %q, want the halt's reason", run, last)
		}
	}
}

// appendRaftEntry appends one command entry holding data to the raft log
// in dataDir, in the last entry's term, and returns its index. The server
// must be stopped (bolt locks its file).
func appendRaftEntry(t *testing.T, dataDir string, data []byte) uint64 {
	t.Helper()
	// Through raftnode, so that the entry carries its checksum as one a
	// newer release wrote would.
	store, err := raftnode.OpenLog(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var prev raft.Log
	if err := store.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	entry := &raft.Log{Index: last + 1, Term: prev.Term, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
	if err := store.StoreLog(entry); err != nil {
		t.Fatal(err)
	}
	return entry.Index
}
