package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openBolt opens a raft-boltdb store at path, closed when the test ends
// unless closed before.
func openBolt(t *testing.T, path string) *raftboltdb.BoltStore {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// roomyGuard never finds the data dir full.
func roomyGuard(dir string) *spaceGuard {
	g := newSpaceGuard(dir, 0, discardLogger())
	g.free = func(string) (uint64, bool, error) { return 1 << 40, true, nil }
	return g
}

func openChecked(t *testing.T, path string) (*checkedStore, *raftboltdb.BoltStore) {
	t.Helper()
	b := openBolt(t, path)
	s, err := newCheckedStore(b, path, roomyGuard(filepath.Dir(path)), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// entries makes raft log entries from..to with recognisable payloads.
func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: fmt.Appendf(nil, "payload-%04d-abcdefgh", i)})
	}
	return out
}

func TestCheckedStoreRoundTrip(t *testing.T) {
	s, _ := openChecked(t, filepath.Join(t.TempDir(), "raft.db"))
	in := entries(1, 20)
	in[4].Extensions = []byte("someone else's extension")
	in[5].Data = nil
	orig := make([]raft.Log, len(in))
	for i, l := range in {
		orig[i] = *l
	}
	if err := s.StoreLogs(in); err != nil {
		t.Fatal(err)
	}
	for i, l := range in {
		if !bytes.Equal(l.Extensions, orig[i].Extensions) {
			t.Fatalf("StoreLogs changed entry %d's extensions to %q", l.Index, l.Extensions)
		}
	}
	for _, want := range orig {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", want.Index, err)
		}
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
			!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", want.Index, got, want)
		}
	}
	if err := s.GetLog(21, &raft.Log{}); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog past the end: %v, want ErrLogNotFound", err)
	}
	st, err := s.verifyLog(0)
	if err != nil || st.first != 1 || st.last != 20 || st.unchecked != 0 {
		t.Fatalf("verifyLog = %+v, %v; want 1..20, all checked", st, err)
	}
}

// flipInFile flips one bit in the middle of every occurrence of pattern in
// the file, as a failing disk might.
func flipInFile(t *testing.T, path string, pattern []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; ; {
		j := bytes.Index(data[i:], pattern)
		if j < 0 {
			break
		}
		data[i+j+len(pattern)/2] ^= 0x04
		n++
		i += j + len(pattern)
	}
	if n == 0 {
		t.Fatalf("%q not found in %s", pattern, path)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckedStoreFindsDamage(t *testing.T) {
	tests := []struct {
		name string
		// damage changes the closed raft.db; entries 1..10 are stored
		// with checksums.
		damage func(t *testing.T, path string)
		want   string
	}{
		{"bit flip in a payload", func(t *testing.T, path string) {
			flipInFile(t, path, []byte("payload-0007-abcdefgh"))
		}, "log entry 7 checksum mismatch"},
		{"entry without a checksum", func(t *testing.T, path string) {
			// raft-boltdb alone writes no checksum.
			b := openBolt(t, path)
			if err := b.StoreLog(&raft.Log{Index: 11, Term: 3, Type: raft.LogCommand, Data: []byte("unframed")}); err != nil {
				t.Fatal(err)
			}
			_ = b.Close()
		}, "log entry 11 has no checksum, but every entry from index 1 on was written with one"},
		{"entry under another index", func(t *testing.T, path string) {
			db, err := bbolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bbolt.Tx) error {
				logs := tx.Bucket([]byte("logs"))
				v := append([]byte(nil), logs.Get(uint64ToKey(4))...)
				return logs.Put(uint64ToKey(11), v)
			}); err != nil {
				t.Fatal(err)
			}
		}, "log entry 11 holds the entry of index 4"},
		{"entry missing in the middle", func(t *testing.T, path string) {
			db, err := bbolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("logs")).Delete(uint64ToKey(5)) }); err != nil {
				t.Fatal(err)
			}
		}, "log entries are missing: no snapshot verifies and the log (1 to 10) lacks entry 5"},
		{"undecodable entry", func(t *testing.T, path string) {
			db, err := bbolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("logs")).Put(uint64ToKey(3), []byte{0xc1, 0xc1}) }); err != nil {
				t.Fatal(err)
			}
		}, "log entry 3 cannot be decoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "raft.db")
			s, b := openChecked(t, path)
			if err := s.StoreLogs(entries(1, 10)); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, path)
			s, _ = openChecked(t, path)
			st, err := s.verifyLog(0)
			if err == nil {
				err = checkCoverage(filepath.Dir(path), path, snapshotReport{}, st)
			}
			var d *DamageError
			if !errors.As(err, &d) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("verifyLog = %v, want a *DamageError", err)
			}
			if d.File != path || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("verifyLog = %q (file %s), want it to name %s and say %q", err, d.File, path, tt.want)
			}
		})
	}
}

func uint64ToKey(i uint64) []byte {
	return []byte{byte(i >> 56), byte(i >> 48), byte(i >> 40), byte(i >> 32), byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
}

// TestCheckedStoreAcceptsOldEntries: entries written before checksums
// existed are accepted unverified (a flipped bit in one goes unnoticed, as
// before); every entry written after is verified.
func TestCheckedStoreAcceptsOldEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	b := openBolt(t, path)
	if err := b.StoreLogs(entries(1, 10)); err != nil {
		t.Fatal(err)
	}
	s, err := newCheckedStore(b, path, roomyGuard(filepath.Dir(path)), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	if s.checkedFrom != 11 {
		t.Fatalf("checkedFrom = %d, want 11", s.checkedFrom)
	}
	if err := s.StoreLogs(entries(11, 20)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openChecked(t, path)
	st, err := s.verifyLog(0)
	if err != nil || st.unchecked != 10 || s.checkedFrom != 11 {
		t.Fatalf("verifyLog = %+v, %v, checkedFrom %d; want 10 unchecked entries, from 11 on checked", st, err, s.checkedFrom)
	}
	_ = s.bolt.Close()

	flipInFile(t, path, []byte("payload-0005-abcdefgh"))
	s, _ = openChecked(t, path)
	if _, err := s.verifyLog(0); err != nil {
		t.Fatalf("a flipped bit in an entry from before checksums: %v; it cannot be detected and is accepted", err)
	}
	_ = s.bolt.Close()

	flipInFile(t, path, []byte("payload-0015-abcdefgh"))
	s, _ = openChecked(t, path)
	if _, err := s.verifyLog(0); err == nil || !strings.Contains(err.Error(), "log entry 15 checksum mismatch") {
		t.Fatalf("a flipped bit in a checked entry: %v, want a checksum mismatch of entry 15", err)
	}
}

func TestCheckedStoreOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, b := openChecked(t, path)
	if err := s.checkOwner("s1"); err != nil {
		t.Fatal(err)
	}
	if err := s.checkOwner("s1"); err != nil {
		t.Fatalf("same owner again: %v", err)
	}
	err := s.checkOwner("s2")
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), `belongs to server "s1", not to "s2"`) {
		t.Fatalf("another owner: %v", err)
	}
	_ = b.Close()
	if id, ok := RecordedServerID(filepath.Dir(filepath.Dir(path))); ok {
		t.Fatalf("RecordedServerID outside a data dir layout = %q", id)
	}
}

func TestCheckedStoreRefusesAppendsWhenFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	b := openBolt(t, path)
	free := uint64(1 << 20)
	g := newSpaceGuard(filepath.Dir(path), 4<<20, discardLogger())
	g.free = func(string) (uint64, bool, error) { return free, true, nil }
	s, err := newCheckedStore(b, path, g, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	err = s.StoreLogs(entries(1, 3))
	var se *SpaceError
	if !errors.Is(err, ErrDataDirFull) || !errors.As(err, &se) || se.Free != 1<<20 || se.Reserve != 4<<20 {
		t.Fatalf("StoreLogs below the reserve = %v, want a SpaceError", err)
	}
	if want := "is full: 1.0 MiB free, below the reserve of 4.0 MiB"; !strings.Contains(err.Error(), want) {
		t.Fatalf("%q does not say %q", err, want)
	}
	if last, _ := s.LastIndex(); last != 0 {
		t.Fatalf("refused entries were stored: last index %d", last)
	}
	// Raft's term and vote must still be recorded.
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatalf("stable store write below the reserve: %v", err)
	}
	free = 8 << 20
	if err := s.StoreLogs(entries(1, 3)); err != nil {
		t.Fatalf("StoreLogs once space is freed: %v", err)
	}
}

// TestStorageFullSignal: the channel a waiting write selects on is closed
// once the data dir is found full, and a fresh open one follows once space
// is freed.
func TestStorageFullSignal(t *testing.T) {
	free := uint64(8 << 20)
	g := newSpaceGuard(t.TempDir(), 4<<20, discardLogger())
	g.free = func(string) (uint64, bool, error) { return free, true, nil }
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	before := g.fullSignal()
	if g.check() != nil || closed(before) {
		t.Fatal("signal closed while the data dir has space")
	}
	free = 1 << 20
	if g.check() == nil || !closed(before) || !closed(g.fullSignal()) {
		t.Fatal("signal not closed once the data dir is found full")
	}
	free = 8 << 20
	if g.check() != nil || closed(g.fullSignal()) {
		t.Fatal("no open signal once space is freed")
	}
	if err := g.failed(syscall.ENOSPC); err == nil || !closed(g.fullSignal()) {
		t.Fatalf("signal not closed after a write failed for lack of space (%v)", err)
	}
}

// TestVerifyLogAcceptsGapsBelowTheSnapshot: after installing a snapshot
// from the leader, raft keeps the log it had, so the log may have a gap
// that the snapshot covers; only entries after the snapshot must all be
// there.
func TestVerifyLogAcceptsGapsBelowTheSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, _ := openChecked(t, path)
	if err := s.StoreLogs(append(entries(1, 4), entries(9, 12)...)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		base, missing uint64
	}{{base: 8, missing: 0}, {base: 12, missing: 0}, {base: 7, missing: 8}, {base: 0, missing: 5}} {
		st, err := s.verifyLog(tt.base)
		if err != nil || st.missing != tt.missing {
			t.Errorf("verifyLog(%d) = %+v, %v; want entry %d missing (0: none)", tt.base, st, err, tt.missing)
		}
	}
}

// TestGetLogAnswersForTheSnapshotsLastEntry: after a snapshot installed
// from the leader, a follower's log may hold entries after the snapshot but
// not its last entry; raft checks that entry's term when the leader sends
// from right after the snapshot, so the store answers it with the
// snapshot's term, and only where no leader could replicate from it.
func TestGetLogAnswersForTheSnapshotsLastEntry(t *testing.T) {
	s, _ := openChecked(t, filepath.Join(t.TempDir(), "raft.db"))
	if err := s.StoreLogs(append(entries(1, 4), entries(11, 12)...)); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(10, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(10) before any snapshot = %+v, %v; want ErrLogNotFound", l, err)
	}
	s.noteSnapshot(10, 7)
	s.noteSnapshot(8, 6) // older: ignored
	if err := s.GetLog(10, &l); err != nil || l.Index != 10 || l.Term != 7 || l.Type != raft.LogNoop {
		t.Fatalf("GetLog(10) after the snapshot = %+v, %v; want a no-op in term 7", l, err)
	}
	for _, index := range []uint64{5, 9, 13} {
		if err := s.GetLog(index, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("GetLog(%d) = %+v, %v; want ErrLogNotFound", index, l, err)
		}
	}
	// With the entry before it present, a leader could replicate from the
	// snapshot's last entry: no stand-in then.
	if err := s.StoreLogs(entries(9, 9)); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(10, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(10) with entry 9 present = %+v, %v; want ErrLogNotFound", l, err)
	}
}
