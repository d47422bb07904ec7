package raftnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// seedDataDir runs a single-server node that writes entries, takes two
// snapshots with entries between and after them, and stops. It returns the
// snapshot directories, newest first, and how many entries were applied.
func seedDataDir(t *testing.T, dir string, trailingLogs uint64) (snaps []string, applied int) {
	t.Helper()
	cfg := testConfig(t, dir, &testFSM{})
	cfg.TrailingLogs = trailingLogs
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	for round := range 3 {
		for i := range 10 {
			apply(t, n, fmt.Sprintf("round%d-entry%d", round, i))
			applied++
		}
		if round < 2 {
			if err := n.Raft().Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	list, err := raft.NewFileSnapshotStore(RaftDir(dir), snapshotsRetained, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := list.List()
	if err != nil || len(metas) != 2 {
		t.Fatalf("snapshots after seeding: %v, %v; want 2", metas, err)
	}
	for _, m := range metas {
		snaps = append(snaps, filepath.Join(RaftDir(dir), snapshotsDir, m.ID))
	}
	return snaps, applied
}

// TestNewRefusesDamagedState starts a node on data dirs damaged in each
// way and expects New to refuse, naming the damaged file.
func TestNewRefusesDamagedState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string, snaps []string) (file string)
		want   string
	}{
		{"truncated raft.db", func(t *testing.T, dir string, _ []string) string {
			// Three pages: the meta pages survive, the tree does not.
			path := filepath.Join(RaftDir(dir), raftDBName)
			must(t, os.Truncate(path, 3*int64(os.Getpagesize())))
			return path
		}, "(truncated?)"},
		{"empty raft.db", func(t *testing.T, dir string, _ []string) string {
			path := filepath.Join(RaftDir(dir), raftDBName)
			must(t, os.Truncate(path, 0))
			return path
		}, "is empty"},
		{"raft.db overwritten", func(t *testing.T, dir string, _ []string) string {
			path := filepath.Join(RaftDir(dir), raftDBName)
			must(t, os.WriteFile(path, []byte(strings.Repeat("not a bolt file ", 2048)), 0o600))
			return path
		}, "is not a valid bolt database"},
		{"bit flip in a log entry", func(t *testing.T, dir string, _ []string) string {
			path := filepath.Join(RaftDir(dir), raftDBName)
			flipInFile(t, path, []byte("round2-entry5"))
			return path
		}, "checksum mismatch"},
		{"truncated newest snapshot", func(t *testing.T, dir string, snaps []string) string {
			path := filepath.Join(snaps[0], snapshotStateFile)
			must(t, os.Truncate(path, 10))
			return path
		}, "has 10 bytes; its meta.json records"},
		{"bit flip in the newest snapshot", func(t *testing.T, dir string, snaps []string) string {
			path := filepath.Join(snaps[0], snapshotStateFile)
			flipInFile(t, path, []byte("round1-entry3"))
			return path
		}, "fails its CRC-64"},
		{"garbled meta of the newest snapshot", func(t *testing.T, dir string, snaps []string) string {
			path := filepath.Join(snaps[0], snapshotMetaFile)
			must(t, os.WriteFile(path, []byte("{garbled"), 0o600))
			return path
		}, "is not valid snapshot metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			// Few trailing logs: the log no longer covers the older
			// snapshot, so a damaged newest one cannot be replaced.
			snaps, _ := seedDataDir(t, dir, 2)
			file := tt.damage(t, dir, snaps)
			n, err := New(testConfig(t, dir, &testFSM{}))
			if err == nil {
				_ = n.Shutdown()
				t.Fatal("New started on a damaged data dir")
			}
			var d *DamageError
			if !errors.As(err, &d) || d.File != file || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v; want a *DamageError naming %s and saying %q", err, file, tt.want)
			}
			assertFileUnlocked(t, filepath.Join(RaftDir(dir), raftDBName))
		})
	}
}

// TestNewFallsBackToOlderSnapshotWhenLogCovers: with a damaged newest
// snapshot and a log that reaches back to the older one, raft restores the
// older snapshot and replays the log: nothing is lost.
func TestNewFallsBackToOlderSnapshotWhenLogCovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snaps, applied := seedDataDir(t, dir, 1000)
	must(t, os.Truncate(filepath.Join(snaps[0], snapshotStateFile), 10))
	fsm := &testFSM{}
	n := startNode(t, testConfig(t, dir, fsm))
	waitLeader(t, n)
	barrier(t, n)
	if entries, _, restores := fsm.state(); len(entries) != applied || restores != 1 {
		t.Fatalf("after the fallback: %d entries, %d restores; want %d entries from one restore", len(entries), restores, applied)
	}
}

// TestNewRefusesWhenNoSnapshotOpens: with every snapshot damaged, raft
// refuses to start even though the log covers the whole history, so New
// reports the newest damaged snapshot (which -rebuild-from-peers repairs)
// rather than raft's own error, which names no file.
func TestNewRefusesWhenNoSnapshotOpens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snaps, _ := seedDataDir(t, dir, 1000)
	for _, snap := range snaps {
		must(t, os.Truncate(filepath.Join(snap, snapshotStateFile), 10))
	}
	n, err := New(testConfig(t, dir, &testFSM{}))
	if err == nil {
		_ = n.Shutdown()
		t.Fatal("New started with no snapshot that opens")
	}
	var d *DamageError
	if want := filepath.Join(snaps[0], snapshotStateFile); !errors.As(err, &d) || d.File != want {
		t.Fatalf("New = %v; want a *DamageError naming %s", err, want)
	}
}

// TestVerifyRemovesIncompleteSnapshots: a snapshot left half-written
// (*.tmp) is never restorable and is removed at start.
func TestVerifyRemovesIncompleteSnapshots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDataDir(t, dir, 1000)
	tmp := filepath.Join(RaftDir(dir), snapshotsDir, "9-99-123.tmp")
	must(t, os.MkdirAll(tmp, 0o700))
	must(t, os.WriteFile(filepath.Join(tmp, snapshotStateFile), []byte("partial"), 0o600))
	startNode(t, testConfig(t, dir, &testFSM{}))
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("incomplete snapshot still there: %v", err)
	}
}

func TestNewRefusesAnotherServersStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDataDir(t, dir, 1000)
	if id, ok := RecordedServerID(dir); !ok || id != "server-1" {
		t.Fatalf("RecordedServerID = %q, %v; want server-1", id, ok)
	}
	cfg := testConfig(t, dir, &testFSM{})
	cfg.ServerID = "server-2"
	_, err := New(cfg)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), `belongs to server "server-1", not to "server-2"`) {
		t.Fatalf("New with another id = %v", err)
	}
}

func TestSetAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDataDir(t, dir, 1000)
	if !StateExists(dir) {
		t.Fatal("StateExists = false after seeding")
	}
	moved, err := SetAside(dir, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if want := RaftDir(dir) + ".damaged-20260102T030405Z"; moved != want {
		t.Fatalf("set aside to %s, want %s", moved, want)
	}
	if StateExists(dir) {
		t.Fatal("StateExists = true after setting the state aside")
	}
	if _, err := os.Stat(filepath.Join(moved, raftDBName)); err != nil {
		t.Fatalf("raft.db not kept: %v", err)
	}
}

// assertFileUnlocked checks that no one holds path's file lock (bolt's
// flock) by taking it.
func assertFileUnlocked(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("%s is still locked: %v", path, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestVerifiedSnapshotReadOnce: the snapshot verified at start is not
// verified again by raft's restore, its first Open; every later Open (a
// snapshot sent to a follower) is verified by the file store.
func TestVerifiedSnapshotReadOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snaps, _ := seedDataDir(t, dir, 1000)
	rep, err := verifySnapshots(RaftDir(dir))
	if err != nil || rep.restorable == nil || rep.restorable.ID != filepath.Base(snaps[0]) {
		t.Fatalf("verifySnapshots = %+v, %v", rep, err)
	}
	files, err := raft.NewFileSnapshotStore(RaftDir(dir), snapshotsRetained, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	store := &guardedSnapshots{SnapshotStore: files, dir: filepath.Join(RaftDir(dir), snapshotsDir), verified: rep.restorable}
	// Changed after verification, so only a second look can tell.
	flipInFile(t, filepath.Join(snaps[0], snapshotStateFile), []byte("round1-entry3"))

	if _, _, err := store.Open(filepath.Base(snaps[1])); err != nil {
		t.Fatalf("Open of the older snapshot: %v", err)
	}
	meta, rc, err := store.Open(rep.restorable.ID)
	if err != nil {
		t.Fatalf("first Open of the verified snapshot: %v", err)
	}
	data, _ := io.ReadAll(rc)
	_ = rc.Close()
	if meta.ID != rep.restorable.ID || meta.Index != rep.restorable.Index || int64(len(data)) != meta.Size {
		t.Fatalf("Open = %+v with %d bytes, want snapshot %+v", meta, len(data), rep.restorable)
	}
	if _, _, err := store.Open(rep.restorable.ID); err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("second Open = %v, want the file store's CRC mismatch", err)
	}
}
