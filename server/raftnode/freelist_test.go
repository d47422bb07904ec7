package raftnode

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// noFreelist is the page id bolt's meta page names as its free list when
// the list is not written (bbolt's common.PgidNoFreelist).
const noFreelist = ^uint64(0)

// metaFreelist reads the free-list page id of the newer of a bolt file's
// two meta pages. Each meta page is a 16-byte page header followed by the
// meta: magic, version, page size and flags (4 bytes each), the root
// bucket (16), the free list (8), the high-water page id (8) and the
// transaction id (8).
func metaFreelist(t *testing.T, path string) uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := os.Getpagesize()
	if len(data) < 2*pageSize {
		t.Fatalf("%s: %d bytes, shorter than its two meta pages", path, len(data))
	}
	var freelist, txid uint64
	for i := range 2 {
		meta := data[i*pageSize+16:]
		if binary.LittleEndian.Uint32(meta) != 0xED0CDAED {
			t.Fatalf("%s: meta page %d has no bolt magic", path, i)
		}
		if id := binary.LittleEndian.Uint64(meta[48:]); id >= txid {
			freelist, txid = binary.LittleEndian.Uint64(meta[32:]), id
		}
	}
	return freelist
}

// compactedLog fills a log through store, then deletes most of it, as raft
// does after a snapshot, so that bolt has many free pages.
func compactedLog(t *testing.T, store raft.LogStore) {
	t.Helper()
	big := make([]byte, 3*os.Getpagesize()) // entries that overflow a page, as groups of writes do
	var logs []*raft.Log
	for i := uint64(1); i <= 300; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: big})
	}
	must(t, store.StoreLogs(logs))
	must(t, store.DeleteRange(1, 250))
}

// TestBoltSkipsTheFreeList: the server's store never writes bolt's free
// list, even once a compaction freed many pages.
func TestBoltSkipsTheFreeList(t *testing.T) {
	dir := t.TempDir()
	must(t, mkdir(RaftDir(dir)))
	log, err := OpenLog(dir)
	must(t, err)
	compactedLog(t, log)
	must(t, log.StoreLogs(entries(301, 310)))
	must(t, log.Close())
	if got := metaFreelist(t, filepath.Join(RaftDir(dir), raftDBName)); got != noFreelist {
		t.Fatalf("meta page names free-list page %d; want none written (NoFreelistSync)", got)
	}
}

// TestBoltFileMovesBetweenFreeListModes: a raft.db written with bolt's
// default options (a server before NoFreelistSync) opens, verifies and
// takes appends under the server's options, and goes back again, as an
// upgrade and a rollback of a running cluster do.
func TestBoltFileMovesBetweenFreeListModes(t *testing.T) {
	dir := t.TempDir()
	must(t, mkdir(RaftDir(dir)))
	path := filepath.Join(RaftDir(dir), raftDBName)

	before, bolt := openChecked(t, path) // bolt's defaults: the free list written
	compactedLog(t, before)
	must(t, bolt.Close())
	if got := metaFreelist(t, path); got == noFreelist {
		t.Fatal("bolt's defaults wrote no free list; the test starts from nothing to migrate")
	}

	for round, want := range []struct {
		name     string
		upgraded bool
	}{{"upgrade", true}, {"rollback", false}, {"upgrade again", true}} {
		must(t, verifyBoltFile(path))
		var store *checkedStore
		var closeStore func() error
		if want.upgraded {
			log, err := OpenLog(dir)
			must(t, err)
			store, closeStore = log.checkedStore, log.Close
		} else {
			s, b := openChecked(t, path)
			store, closeStore = s, b.Close
		}
		st, err := store.verifyLog(0)
		if err != nil || st.first != 251 || st.last != uint64(300+10*round) {
			t.Fatalf("%s: verifyLog = %+v, %v; want 251..%d", want.name, st, err, 300+10*round)
		}
		from := uint64(301 + 10*round)
		must(t, store.StoreLogs(entries(from, from+9)))
		must(t, closeStore())
		must(t, verifyBoltFile(path))
		if got := metaFreelist(t, path); (got == noFreelist) != want.upgraded {
			t.Fatalf("%s: meta page names free-list page %d", want.name, got)
		}
	}

	// bolt's own check of the page tree, with the free list rebuilt.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	must(t, err)
	defer func() { _ = db.Close() }()
	must(t, db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}))
}
