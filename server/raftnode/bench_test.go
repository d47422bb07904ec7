package raftnode

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// benchEntries makes n log entries of size bytes each.
func benchEntries(from, n, size int) []*raft.Log {
	data := make([]byte, size)
	_, _ = rand.Read(data)
	out := make([]*raft.Log, n)
	for i := range out {
		out[i] = &raft.Log{Index: uint64(from + i), Term: 2, Type: raft.LogCommand, Data: data}
	}
	return out
}

// BenchmarkVerifyStartup measures the start-up checks on a data dir with a
// log of 10,240 entries (raft's default trailing logs) of 1 KiB and a
// snapshot of 256 MiB: bbolt's page check, the checksum of every entry and
// the CRC-64 of the snapshot. Files are in the page cache after the first
// round, so this is the CPU cost; a cold start adds reading them once.
//
//	go test -run '^$' -bench VerifyStartup -benchtime 5x ./server/raftnode/
func BenchmarkVerifyStartup(b *testing.B) {
	dir := b.TempDir()
	raftDir := RaftDir(dir)
	dbPath := filepath.Join(raftDir, raftDBName)
	if err := mkdir(raftDir); err != nil {
		b.Fatal(err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: dbPath, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	store, err := newCheckedStore(bolt, dbPath, roomyGuard(dir), discardLogger())
	if err != nil {
		b.Fatal(err)
	}
	const entries, snapIndex = 10240, 20000
	for i := 0; i < entries; i += 256 {
		if err := store.StoreLogs(benchEntries(snapIndex-entries/2+i, min(256, entries-i), 1024)); err != nil {
			b.Fatal(err)
		}
	}
	_ = bolt.Close()
	files, err := raft.NewFileSnapshotStore(raftDir, snapshotsRetained, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	sink, err := files.Create(raft.SnapshotVersionMax, snapIndex, 2, raft.Configuration{}, 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	_, _ = rand.Read(chunk)
	for range 256 {
		if _, err := sink.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		b.Fatal(err)
	}

	var boltTime, stateTime time.Duration
	for b.Loop() {
		start := time.Now()
		if err := verifyBoltFile(dbPath); err != nil {
			b.Fatal(err)
		}
		boltTime += time.Since(start)
		bolt, err := raftboltdb.New(raftboltdb.Options{Path: dbPath})
		if err != nil {
			b.Fatal(err)
		}
		store, err := newCheckedStore(bolt, dbPath, roomyGuard(dir), discardLogger())
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if _, err := verifyState(store, raftDir, "s1", discardLogger()); err != nil {
			b.Fatal(err)
		}
		stateTime += time.Since(start)
		_ = bolt.Close()
	}
	b.ReportMetric(float64(boltTime.Microseconds())/float64(b.N)/1000, "ms-bolt-check/op")
	b.ReportMetric(float64(stateTime.Microseconds())/float64(b.N)/1000, "ms-log+snapshot/op")
}

// BenchmarkVerifyLog is the log part of the start-up checks alone: 10,240
// entries of 1 KiB.
func BenchmarkVerifyLog(b *testing.B) {
	path := filepath.Join(b.TempDir(), raftDBName)
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bolt.Close() })
	store, err := newCheckedStore(bolt, path, roomyGuard(filepath.Dir(path)), discardLogger())
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 10240; i += 256 {
		if err := store.StoreLogs(benchEntries(1+i, 256, 1024)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if st, err := store.verifyLog(0); err != nil || st.last != 10240 {
			b.Fatal(st, err)
		}
	}
}

// BenchmarkStoreLogs measures one append of a batch of entries to bolt
// alone, through the checked store with the space guard off, and with the
// guard measuring free space (statfs) on every append. Without fsync: a
// real append's fsync (1 to 8 ms on a shared disk) is the same in every
// mode and would hide the difference.
//
//	go test -run '^$' -bench StoreLogs -count 5 ./server/raftnode/
func BenchmarkStoreLogs(b *testing.B) {
	for _, batch := range []int{1, 64} {
		for _, mode := range []string{"bolt", "checksums", "checksums+guard"} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, mode), func(b *testing.B) {
				dir := b.TempDir()
				path := filepath.Join(dir, raftDBName)
				bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = bolt.Close() })
				var store raft.LogStore = bolt
				if mode != "bolt" {
					guard := roomyGuard(dir)
					if mode == "checksums+guard" {
						guard = newSpaceGuard(dir, 1<<20, discardLogger())
					}
					if store, err = newCheckedStore(bolt, path, guard, discardLogger()); err != nil {
						b.Fatal(err)
					}
				}
				// The same indexes each round, so that the file does not
				// grow and rounds stay alike.
				logs := benchEntries(1, batch, 512)
				b.SetBytes(int64(batch * 512))
				for b.Loop() {
					if err := store.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSpaceCheck is the guard's own cost: one statfs.
func BenchmarkSpaceCheck(b *testing.B) {
	g := newSpaceGuard(b.TempDir(), 1<<20, discardLogger())
	for b.Loop() {
		if err := g.check(); err != nil {
			b.Fatal(err)
		}
	}
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o700) }

// BenchmarkChecksumFrame is the checksum's CPU cost per entry of 512
// bytes: framing on append and verifying on read.
func BenchmarkChecksumFrame(b *testing.B) {
	l := benchEntries(1, 1, 512)[0]
	b.SetBytes(512)
	for b.Loop() {
		stored := *l
		stored.Extensions = frame(l)
		if framed, err := unframe(&stored); !framed || err != nil {
			b.Fatal(framed, err)
		}
	}
}

// BenchmarkAppendAfterCompaction measures one fsynced append of a 40 KiB
// entry (a group of registrations) to a log that raft has compacted: 12,288
// entries written, the oldest 8,192 deleted, as after a snapshot. With
// bolt's default options every commit also writes the list of the pages
// the compaction freed; the server's options (boltOptions) do not.
// cpu-us/op is the process's CPU per append.
//
//	go test -run '^$' -bench AppendAfterCompaction -benchtime 1000x -count 5 ./server/raftnode/
func BenchmarkAppendAfterCompaction(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts *bbolt.Options
	}{
		{"freelist=written", &bbolt.Options{FreelistType: bbolt.FreelistArrayType}},
		{"freelist=rebuilt", boltOptions()},
	} {
		b.Run(mode.name, func(b *testing.B) {
			bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), raftDBName), BoltOptions: mode.opts})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = bolt.Close() })
			const size, written, deleted = 40 << 10, 12288, 8192
			for i := 1; i <= written; i += 256 {
				if err := bolt.StoreLogs(benchEntries(i, 256, size)); err != nil {
					b.Fatal(err)
				}
			}
			if err := bolt.DeleteRange(1, deleted); err != nil {
				b.Fatal(err)
			}
			entry := benchEntries(written+1, 1, size)
			b.SetBytes(size)
			start := processCPU(b)
			for b.Loop() {
				if err := bolt.StoreLogs(entry); err != nil {
					b.Fatal(err)
				}
				entry[0].Index++
			}
			b.ReportMetric(float64((processCPU(b)-start).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// processCPU is the user and system CPU the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
