package test_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// damageCase damages one file of a stopped server's data dir.
type damageCase struct {
	name string
	// damage returns the damaged file (relative to the data dir) and a
	// part of what the refusal must say about it. marker is a string that
	// the server's raft log holds (a node's name).
	damage func(t *testing.T, s *cluster.Server, marker string) (file, says string)
}

// raftDamages are the damages to raft's own files.
var raftDamages = []damageCase{
	{"truncated raft.db", func(t *testing.T, s *cluster.Server, _ string) (string, string) {
		s.DamageFile(cluster.RaftDB, cluster.TruncateTo(16<<10))
		return cluster.RaftDB, "(truncated?)"
	}},
	{"bit flips in a log entry's payload", func(t *testing.T, s *cluster.Server, marker string) (string, string) {
		s.DamageFile(cluster.RaftDB, cluster.FlipBitsIn([]byte(marker)))
		return cluster.RaftDB, "checksum mismatch"
	}},
	{"truncated newest snapshot", func(t *testing.T, s *cluster.Server, _ string) (string, string) {
		file := filepath.Join(newestSnapshot(t, s), "state.bin")
		s.DamageFile(file, cluster.CutTail(100))
		return file, "(truncated?)"
	}},
	{"bit flip in the newest snapshot", func(t *testing.T, s *cluster.Server, _ string) (string, string) {
		file := filepath.Join(newestSnapshot(t, s), "state.bin")
		s.DamageFile(file, cluster.FlipBitAt(-200))
		return file, "fails its CRC-64"
	}},
}

func newestSnapshot(t *testing.T, s *cluster.Server) string {
	t.Helper()
	snaps := s.Snapshots()
	if len(snaps) == 0 {
		t.Fatalf("%s has no snapshot", s)
	}
	return snaps[0]
}

// TestDamagedRaftStateRefusedThenRebuilt damages raft.db and the newest
// snapshot of a follower in turn. Each time the server must refuse to
// start, exit non-zero and name the damaged file; started with
// -rebuild-from-peers it must set the damaged state aside, rejoin, catch
// up and become a voter again, with every server agreeing on the state.
//
// Snapshots are frequent and the log after them short, so a server's two
// snapshots are not bridged by its log: a damaged newest snapshot cannot
// be replaced by the older one.
func TestDamagedRaftStateRefusedThenRebuilt(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.Snapshots(64, 500*time.Millisecond, 32), cluster.Autopilot(time.Second, time.Hour))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	leader := c.WaitLeader(ctx)
	c.WaitHealthy(ctx, 3)
	var nodes []*droverv1.Node
	for _, dc := range raftDamages {
		leader = c.WaitLeader(ctx)
		s := c.Others(leader)[0]
		nodes = append(nodes, writeUntilSnapshots(t, ctx, leader, s, 2)...)
		// The last entry, so still in the log after any snapshot.
		marker := mock.Node()
		marker.Name = "damage-marker-" + marker.GetId()
		if _, err := registerNode(ctx, leader.Conn(), marker); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, marker)
		c.WaitConverged(ctx)
		s.Stop()

		file, says := dc.damage(t, s, marker.GetName())
		refusedNaming(t, s, dc.name, file, says, "-rebuild-from-peers")

		joined := joins(c.Others(s), s)
		s.RestartWith("-rebuild-from-peers")
		c.WaitHealthy(ctx, 3)
		c.WaitConverged(ctx)
		// It left the configuration and joined as a new member (a
		// non-voter until caught up), not as the voter it was: a voter
		// without its log could elect a leader that lacks committed
		// entries.
		if now := joins(c.Others(s), s); now != joined+1 {
			t.Errorf("%s: the leader added %s as a new server %d times, want once", dc.name, s, now-joined)
		}
		requireNodes(ctx, t, c.Servers(), nodes)
		setAside(t, s, "raft.damaged-*", 1)
		// Once rebuilt, the data dir is whole: it starts without the flag.
		s.Restart()
		c.WaitConverged(ctx)
		removeSetAside(t, s, "raft.damaged-*")
	}
}

// TestDamagedServerIDRefusedThenRebuilt garbles, then removes, the
// server-id file of servers that take their id from it (no -server-id):
// the server must refuse, name the file and say which id raft.db records;
// with -rebuild-from-peers it rebuilds under that id.
func TestDamagedServerIDRefusedThenRebuilt(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.ServerIDFromDataDir(), cluster.Autopilot(time.Second, time.Hour))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	leader := c.WaitLeader(ctx)
	c.WaitHealthy(ctx, 3)
	nodes := registerNodes(ctx, t, leader.Conn(), 50, 4)
	for _, dc := range []struct {
		name   string
		damage cluster.Damage
		says   string
		// kept is how many server-id files the rebuild sets aside.
		kept int
	}{
		{"garbled server-id", cluster.Overwrite([]byte("s\x00\x13\xfe")), "does not hold a valid server id", 1},
		{"missing server-id", cluster.Remove(), "is missing, but the data dir holds raft state", 0},
	} {
		leader = c.WaitLeader(ctx)
		s := c.Others(leader)[0]
		s.Stop()
		s.DamageFile(cluster.ServerIDFile, dc.damage)
		refusedNaming(t, s, dc.name, cluster.ServerIDFile, dc.says, fmt.Sprintf("raft.db records server %q", s.ID()))

		s.RestartWith("-rebuild-from-peers")
		c.WaitHealthy(ctx, 3)
		c.WaitConverged(ctx)
		requireNodes(ctx, t, c.Servers(), nodes)
		setAside(t, s, "server-id.damaged-*", dc.kept)
		setAside(t, s, "raft.damaged-*", 1)
		data, err := os.ReadFile(filepath.Join(s.DataDir(), cluster.ServerIDFile))
		if err != nil || strings.TrimSpace(string(data)) != s.ID() {
			t.Errorf("%s: server-id after the rebuild holds %q (%v), want %s", dc.name, data, err, s.ID())
		}
		removeSetAside(t, s, "server-id.damaged-*")
		removeSetAside(t, s, "raft.damaged-*")
	}
}

// TestRebuildRefused: -rebuild-from-peers must not touch the data dir of a
// single-server cluster, or when no peer answers.
func TestRebuildRefused(t *testing.T) {
	t.Run("single server", func(t *testing.T) {
		c := cluster.New(t, droverBin, 1, cluster.Bootstrap())
		ctx := testContext(t)
		s := c.WaitLeader(ctx)
		registerNodes(ctx, t, s.Conn(), 10, 2)
		s.Stop()
		s.DamageFile(cluster.RaftDB, cluster.TruncateTo(16<<10))
		before := dirListing(t, s.DataDir())
		err, out := s.StartRefused("-rebuild-from-peers")
		checkRefusal(t, "single server", err, out, "single-server cluster has no peer to rebuild from", "the data dir is untouched", "raft.db is damaged")
		if after := dirListing(t, s.DataDir()); after != before {
			t.Errorf("data dir changed by a refused rebuild:\nbefore %s\nafter  %s", before, after)
		}
	})
	t.Run("peers unreachable", func(t *testing.T) {
		c := cluster.New(t, droverBin, 3)
		ctx := testContext(t)
		leader := c.WaitLeader(ctx)
		registerNodes(ctx, t, leader.Conn(), 10, 2)
		c.WaitConverged(ctx)
		for _, s := range c.Servers() {
			s.Stop()
		}
		s := c.Server(1)
		s.DamageFile(cluster.RaftDB, cluster.TruncateTo(16<<10))
		before := dirListing(t, s.DataDir())
		err, out := s.StartRefused("-rebuild-from-peers")
		checkRefusal(t, "peers unreachable", err, out, "no peer could describe the cluster", "the data dir is untouched")
		if after := dirListing(t, s.DataDir()); after != before {
			t.Errorf("data dir changed by a refused rebuild:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// joins counts how often the servers' current runs logged adding s to
// the raft configuration as a new server.
func joins(servers []*cluster.Server, s *cluster.Server) int {
	n := 0
	for _, srv := range servers {
		for _, rec := range srv.LogRecords() {
			if rec["msg"] == "server joined" && rec["id"] == s.ID() {
				n++
			}
		}
	}
	return n
}

// refusedNaming starts s, expects it to refuse, and checks that what it
// wrote names the damaged file and says what is wrong and how to recover.
func refusedNaming(t *testing.T, s *cluster.Server, what, file, says, hint string) {
	t.Helper()
	err, out := s.StartRefused()
	t.Logf("%s: %s", what, out)
	checkRefusal(t, what, err, out, filepath.Join(s.DataDir(), file)+" is damaged", says, hint)
}

func checkRefusal(t *testing.T, what string, err error, out string, wants ...string) {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Errorf("%s: the server exited with %v, want a non-zero status", what, err)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s: the server's output does not say %q:\n%s", what, want, out)
		}
	}
}

// writeUntilSnapshots registers nodes through leader, one at a time so
// that each is its own raft entry, until s holds n snapshots taken since
// the call (raft keeps two). It returns the nodes.
func writeUntilSnapshots(t *testing.T, ctx context.Context, leader, s *cluster.Server, n int) []*droverv1.Node {
	t.Helper()
	dir := filepath.Join(s.DataDir(), cluster.SnapshotsDir)
	before := snapshotNames(dir)
	var nodes []*droverv1.Node
	poll(within(t, ctx, time.Minute), t, fmt.Sprintf("%s took %d snapshots", s, n), func() (bool, string) {
		newer := 0
		for name := range snapshotNames(dir) {
			if !before[name] {
				newer++
			}
		}
		if newer >= n {
			return true, ""
		}
		nodes = append(nodes, registerNodes(ctx, t, leader.Conn(), 20, 1)...)
		return false, fmt.Sprintf("%d new snapshots after %d nodes", newer, len(nodes))
	})
	return nodes
}

// snapshotNames lists the complete snapshots in dir.
func snapshotNames(dir string) map[string]bool {
	entries, _ := os.ReadDir(dir)
	names := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			names[e.Name()] = true
		}
	}
	return names
}

// setAside checks that the rebuild kept n copies of the damaged state.
func setAside(t *testing.T, s *cluster.Server, pattern string, n int) {
	t.Helper()
	kept, err := filepath.Glob(filepath.Join(s.DataDir(), pattern))
	if err != nil || len(kept) != n {
		t.Errorf("%s: %v (%v) set aside as %s, want %d", s, kept, err, pattern, n)
	}
}

func removeSetAside(t *testing.T, s *cluster.Server, pattern string) {
	t.Helper()
	kept, _ := filepath.Glob(filepath.Join(s.DataDir(), pattern))
	for _, k := range kept {
		if err := os.RemoveAll(k); err != nil {
			t.Fatal(err)
		}
	}
}

// dirListing describes every file under dir with its size.
func dirListing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s:%d ", strings.TrimPrefix(path, dir), fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
