package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Keys of drover's own records in raft's stable store (bolt's "conf"
// bucket, beside raft's CurrentTerm and vote).
var (
	// keyChecksumsFrom holds the first log index from which every entry
	// carries a checksum: entries below it may predate checksums.
	keyChecksumsFrom = []byte("drover.checksums-from")
	// keyServerID holds the id of the server the store belongs to.
	keyServerID = []byte("drover.server-id")
)

// An entry's checksum travels in its Extensions field, which raft-boltdb
// stores with the entry and which raft leaves to the LogStore's users:
//
//	"drc1" | CRC-32C (4 bytes, big endian) | the entry's own Extensions
//
// The CRC covers the index, term, type, data and own extensions; not
// AppendedAt, which raft keeps for metrics only. The frame never leaves
// the store: GetLog strips it, so raft replicates entries as they were
// given.
const (
	frameMagic = "drc1"
	frameLen   = len(frameMagic) + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entryChecksum is the CRC-32C of what the frame protects.
func entryChecksum(l *raft.Log, ext []byte) uint32 {
	var head [8 + 8 + 1 + 8]byte
	binary.BigEndian.PutUint64(head[0:], l.Index)
	binary.BigEndian.PutUint64(head[8:], l.Term)
	head[16] = byte(l.Type)
	binary.BigEndian.PutUint64(head[17:], uint64(len(l.Data)))
	sum := crc32.Update(0, castagnoli, head[:])
	sum = crc32.Update(sum, castagnoli, l.Data)
	return crc32.Update(sum, castagnoli, ext)
}

// frame returns l's Extensions with the checksum frame in front.
func frame(l *raft.Log) []byte {
	out := make([]byte, frameLen+len(l.Extensions))
	copy(out, frameMagic)
	binary.BigEndian.PutUint32(out[len(frameMagic):], entryChecksum(l, l.Extensions))
	copy(out[frameLen:], l.Extensions)
	return out
}

// unframe checks a stored entry's frame and restores its own Extensions.
// framed is false for an entry stored without a frame.
func unframe(l *raft.Log) (framed bool, err error) {
	if !bytes.HasPrefix(l.Extensions, []byte(frameMagic)) || len(l.Extensions) < frameLen {
		return false, nil
	}
	stored := binary.BigEndian.Uint32(l.Extensions[len(frameMagic):])
	ext := l.Extensions[frameLen:]
	if computed := entryChecksum(l, ext); computed != stored {
		return true, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", stored, computed)
	}
	if len(ext) == 0 {
		ext = nil
	}
	l.Extensions = ext
	return true, nil
}

// checkedStore is the log and stable store raft uses: bolt, with a
// checksum on every log entry it writes, verified on every read, and the
// space guard in front of appends. Snapshots and the LogCache sit above
// it, so what raft reads from disk is always verified.
type checkedStore struct {
	bolt   *raftboltdb.BoltStore
	path   string // raft.db, for messages
	guard  *spaceGuard
	logger *slog.Logger
	// checkedFrom is the first index from which every entry must carry a
	// checksum; entries below it were written before checksums existed.
	checkedFrom uint64
	// snapshot is the newest snapshot raft restored, took or installed.
	snapshot atomic.Pointer[snapshotMark]
}

// snapshotMark is a snapshot's last index and term.
type snapshotMark struct{ index, term uint64 }

// noteSnapshot records a snapshot raft restored, took or installed.
func (s *checkedStore) noteSnapshot(index, term uint64) {
	for {
		old := s.snapshot.Load()
		if old != nil && old.index >= index {
			return
		}
		if s.snapshot.CompareAndSwap(old, &snapshotMark{index: index, term: term}) {
			return
		}
	}
}

var (
	_ raft.LogStore    = (*checkedStore)(nil)
	_ raft.StableStore = (*checkedStore)(nil)
)

// newCheckedStore wraps bolt. On the first open of a store written before
// checksums, it records that entries from the next index on carry one.
func newCheckedStore(bolt *raftboltdb.BoltStore, path string, guard *spaceGuard, logger *slog.Logger) (*checkedStore, error) {
	s := &checkedStore{bolt: bolt, path: path, guard: guard, logger: logger}
	from, err := bolt.GetUint64(keyChecksumsFrom)
	switch {
	case err == nil:
		s.checkedFrom = from
		return s, nil
	case !errors.Is(err, raftboltdb.ErrKeyNotFound):
		return nil, &DamageError{File: path, Problem: "cannot read the checksum record", Err: err}
	}
	last, err := bolt.LastIndex()
	if err != nil {
		return nil, &DamageError{File: path, Problem: "cannot read the last log index", Err: err}
	}
	s.checkedFrom = last + 1
	if err := bolt.SetUint64(keyChecksumsFrom, s.checkedFrom); err != nil {
		// Not fatal: without the record the next start takes its own last
		// index as the boundary, and entries with a frame are verified
		// either way.
		logger.Warn("could not record where log checksums begin", "path", path, "from", s.checkedFrom, "err", guard.failed(err))
	}
	if last > 0 {
		logger.Info("log entries written before checksums are accepted unverified", "path", path, "up_to_index", last)
	}
	return s, nil
}

// FirstIndex returns the first index in the log.
func (s *checkedStore) FirstIndex() (uint64, error) { return s.bolt.FirstIndex() }

// LastIndex returns the last index in the log.
func (s *checkedStore) LastIndex() (uint64, error) { return s.bolt.LastIndex() }

// GetLog reads and verifies the entry at index. An entry that fails its
// checksum, decodes to another index, or lacks a checksum where every
// entry has one is a *DamageError: raft stops rather than apply it.
//
// A follower that installed a snapshot from the leader keeps the entries it
// already had after it, but not the snapshot's last entry, and hashicorp/raft
// looks for that entry when the leader's next AppendEntries starts right
// after the snapshot: not finding it, the follower refuses, the leader
// backs off to a snapshot again, and the follower never catches up (raft
// issue 205; it takes only a retried AppendEntries at the wrong moment). So
// for the last index of the newest snapshot, when the log holds neither it
// nor the entry before it, GetLog answers a no-op entry in the snapshot's
// term: what raft itself assumes of a snapshot's last entry when it sends
// (replication.go, setPreviousLog). Entry terms at a committed index never
// differ, and without the entry before it no leader replicates from it.
func (s *checkedStore) GetLog(index uint64, l *raft.Log) error {
	_, err := s.getLog(index, l)
	if errors.Is(err, raft.ErrLogNotFound) {
		if mark := s.snapshot.Load(); mark != nil && mark.index == index && !s.has(index-1) {
			*l = raft.Log{Index: index, Term: mark.term, Type: raft.LogNoop}
			return nil
		}
	}
	return err
}

// has reports whether the log holds the entry at index.
func (s *checkedStore) has(index uint64) bool {
	var l raft.Log
	return index > 0 && !errors.Is(s.bolt.GetLog(index, &l), raft.ErrLogNotFound)
}

// getLog is GetLog, also saying whether the entry carried a checksum.
func (s *checkedStore) getLog(index uint64, l *raft.Log) (framed bool, err error) {
	if err := s.bolt.GetLog(index, l); err != nil {
		if errors.Is(err, raft.ErrLogNotFound) {
			return false, err
		}
		return false, s.damaged(index, "cannot be decoded", err)
	}
	if l.Index != index {
		return false, s.damaged(index, fmt.Sprintf("holds the entry of index %d", l.Index), nil)
	}
	framed, err = unframe(l)
	switch {
	case err != nil:
		return framed, s.damaged(index, err.Error(), nil)
	case !framed && index >= s.checkedFrom:
		return false, s.damaged(index, fmt.Sprintf("has no checksum, but every entry from index %d on was written with one", s.checkedFrom), nil)
	}
	return framed, nil
}

func (s *checkedStore) damaged(index uint64, problem string, err error) error {
	d := &DamageError{File: s.path, Problem: fmt.Sprintf("log entry %d %s", index, problem), Err: err}
	s.logger.Error("raft log entry failed verification; the data dir is damaged", "err", d)
	return d
}

// StoreLog stores one entry.
func (s *checkedStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries with their checksums, in one bolt transaction,
// unless the data dir is (nearly) full. The entries given are not changed:
// raft keeps them in its cache and replicates them.
func (s *checkedStore) StoreLogs(logs []*raft.Log) error {
	if err := s.guard.check(); err != nil {
		return err
	}
	copies := make([]raft.Log, len(logs))
	framed := make([]*raft.Log, len(logs))
	for i, l := range logs {
		copies[i] = *l
		copies[i].Extensions = frame(l)
		framed[i] = &copies[i]
	}
	return s.guard.failed(s.bolt.StoreLogs(framed))
}

// DeleteRange deletes entries; it is how raft compacts the log after a
// snapshot, so the guard never refuses it.
func (s *checkedStore) DeleteRange(lo, hi uint64) error {
	return s.guard.failed(s.bolt.DeleteRange(lo, hi))
}

// Set, Get, SetUint64 and GetUint64 are raft's stable store (term and
// vote). Writes are never refused: raft panics when it cannot record a new
// term. That is what the space guard's reserve is kept for.
func (s *checkedStore) Set(k, v []byte) error { return s.stableWrite(k, s.bolt.Set(k, v)) }

// Get reads a stable-store key.
func (s *checkedStore) Get(k []byte) ([]byte, error) { return s.bolt.Get(k) }

// SetUint64 writes a stable-store number.
func (s *checkedStore) SetUint64(k []byte, v uint64) error {
	return s.stableWrite(k, s.bolt.SetUint64(k, v))
}

// GetUint64 reads a stable-store number.
func (s *checkedStore) GetUint64(k []byte) (uint64, error) { return s.bolt.GetUint64(k) }

func (s *checkedStore) stableWrite(key []byte, err error) error {
	if err == nil {
		return nil
	}
	err = s.guard.failed(err)
	s.logger.Error("cannot record raft state", "key", string(key), "path", s.path, "err", err)
	return err
}

// logStats is what verifying the whole log found.
type logStats struct {
	first, last uint64
	// unchecked counts entries written before checksums existed.
	unchecked uint64
	// missing is the first index after the snapshot that is not in the
	// log, 0 if none is missing.
	missing uint64
}

// verifyLog reads every entry of the log through GetLog, and finds the
// first entry missing after base, the index of the snapshot raft will
// restore. Gaps at or below base are normal: raft keeps the log it had
// when it installs a snapshot sent by the leader, and never reads those
// entries again for its own state.
func (s *checkedStore) verifyLog(base uint64) (logStats, error) {
	var st logStats
	var err error
	if st.first, err = s.bolt.FirstIndex(); err != nil {
		return st, &DamageError{File: s.path, Problem: "cannot read the first log index", Err: err}
	}
	if st.last, err = s.bolt.LastIndex(); err != nil {
		return st, &DamageError{File: s.path, Problem: "cannot read the last log index", Err: err}
	}
	if st.last == 0 {
		return st, nil
	}
	if st.last > base && st.first > base+1 {
		st.missing = base + 1
	}
	var l raft.Log
	for i := st.first; i <= st.last; i++ {
		l = raft.Log{}
		framed, err := s.getLog(i, &l)
		switch {
		case errors.Is(err, raft.ErrLogNotFound):
			if i > base && st.missing == 0 {
				st.missing = i
			}
			continue
		case err != nil:
			return st, err
		case !framed:
			st.unchecked++
		}
	}
	return st, nil
}

// checkOwner records the server id the store belongs to on its first
// open, and refuses a store that belongs to another server.
func (s *checkedStore) checkOwner(serverID string) error {
	stored, err := s.bolt.Get(keyServerID)
	switch {
	case err == nil:
		if string(stored) != serverID {
			return &DamageError{File: s.path, Problem: fmt.Sprintf("it belongs to server %q, not to %q (the server id given or in the server-id file)", stored, serverID)}
		}
		return nil
	case !errors.Is(err, raftboltdb.ErrKeyNotFound):
		return &DamageError{File: s.path, Problem: "cannot read the server id record", Err: err}
	}
	if err := s.bolt.Set(keyServerID, []byte(serverID)); err != nil {
		s.logger.Warn("could not record the server id in the raft store", "path", s.path, "err", s.guard.failed(err))
	}
	return nil
}
