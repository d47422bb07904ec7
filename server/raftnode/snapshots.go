package raftnode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
)

// The file snapshot store's layout: snapshots/<id>/{meta.json,state.bin},
// written under <id>.tmp and renamed into place once complete.
const (
	snapshotsDir      = "snapshots"
	snapshotMetaFile  = "meta.json"
	snapshotStateFile = "state.bin"
	snapshotTmpSuffix = ".tmp"
)

// guardCheckEvery is how many snapshot bytes are written between two looks
// at the free space.
const guardCheckEvery = 1 << 20

// guardedSnapshots is raft's file snapshot store behind the space guard: a
// snapshot is not started, and one being written is abandoned, while the
// data dir is below its reserve, so that snapshots cannot eat the space
// kept for raft's own records. A snapshot that fails is removed.
type guardedSnapshots struct {
	raft.SnapshotStore
	dir   string // the snapshots directory
	guard *spaceGuard
	// completed is told of every snapshot written in full (taken, or
	// installed from the leader).
	completed func(index, term uint64)

	mu sync.Mutex
	// verified is the snapshot the start-up checks read in full; raft's
	// first Open of it, the restore at start, skips the file store's
	// second pass over it.
	verified *snapshotMeta
}

// Open opens a snapshot for reading. The file store verifies its CRC-64
// first, reading it in full; the snapshot verified at start is not read
// twice.
func (s *guardedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	s.mu.Lock()
	verified := s.verified != nil && s.verified.ID == id
	if verified {
		s.verified = nil
	}
	s.mu.Unlock()
	if !verified {
		return s.SnapshotStore.Open(id)
	}
	dir := filepath.Join(s.dir, id)
	data, err := os.ReadFile(filepath.Join(dir, snapshotMetaFile))
	if err != nil {
		return nil, nil, err
	}
	var meta raft.SnapshotMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	f, err := os.Open(filepath.Join(dir, snapshotStateFile))
	if err != nil {
		return nil, nil, err
	}
	return &meta, &bufferedFile{Reader: bufio.NewReader(f), Closer: f}, nil
}

// bufferedFile reads a file through a buffer, as the file store's Open
// returns it.
type bufferedFile struct {
	*bufio.Reader
	io.Closer
}

// Create starts a snapshot unless the data dir is full.
func (s *guardedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	if err := s.guard.check(); err != nil {
		return nil, err
	}
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, s.guard.failed(err)
	}
	return &guardedSink{SnapshotSink: sink, dir: s.dir, guard: s.guard, index: index, term: term, completed: s.completed}, nil
}

// guardedSink watches the free space while a snapshot is written.
type guardedSink struct {
	raft.SnapshotSink
	dir         string
	guard       *spaceGuard
	index, term uint64
	completed   func(index, term uint64)
	unchecked   int // bytes written since the last look at the free space
}

func (s *guardedSink) Write(p []byte) (int, error) {
	s.unchecked += len(p)
	if s.unchecked >= guardCheckEvery {
		s.unchecked = 0
		if err := s.guard.check(); err != nil {
			return 0, err
		}
	}
	n, err := s.SnapshotSink.Write(p)
	return n, s.guard.failed(err)
}

// Close completes the snapshot; if that fails, what was written is removed.
func (s *guardedSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		s.removeTemp()
		return s.guard.failed(err)
	}
	if s.completed != nil {
		s.completed(s.index, s.term)
	}
	return nil
}

// Cancel abandons the snapshot and removes what was written. The file
// store leaves it behind when flushing fails, as it does on a full disk.
func (s *guardedSink) Cancel() error {
	err := s.SnapshotSink.Cancel()
	s.removeTemp()
	return err
}

func (s *guardedSink) removeTemp() {
	_ = os.RemoveAll(filepath.Join(s.dir, s.ID()+snapshotTmpSuffix))
}

// snapshotMeta is the part of the file store's meta.json that verification
// needs.
type snapshotMeta struct {
	ID    string
	Index uint64
	Term  uint64
	Size  int64
	CRC   []byte
}

// snapshotReport is what verifying the snapshots found.
type snapshotReport struct {
	// restorable is the newest snapshot that verifies; nil if none.
	restorable *snapshotMeta
	// damaged are the snapshots newer than restorable that do not verify,
	// newest first, each with what is wrong.
	damaged []*DamageError
	// removedTemp lists incomplete snapshots removed.
	removedTemp []string
}

// verifySnapshots checks the snapshots newest first, as raft restores
// them, until one verifies: its meta.json parses, and its state.bin has the
// size and CRC-64 the meta records. Older ones are not read; raft never
// restores them while a newer one verifies. Incomplete snapshots
// (*.tmp, never restorable) are removed.
func verifySnapshots(raftDir string) (snapshotReport, error) {
	var rep snapshotReport
	dir := filepath.Join(raftDir, snapshotsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, &DamageError{File: dir, Problem: "cannot be listed", Err: err}
	}
	var metas []*snapshotMeta
	for _, e := range entries {
		switch {
		case !e.IsDir():
			continue
		case strings.HasSuffix(e.Name(), snapshotTmpSuffix):
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return rep, fmt.Errorf("remove incomplete snapshot %s: %w", filepath.Join(dir, e.Name()), err)
			}
			rep.removedTemp = append(rep.removedTemp, e.Name())
			continue
		}
		meta, err := readSnapshotMeta(filepath.Join(dir, e.Name()))
		if err != nil {
			// raft skips a snapshot whose meta it cannot read without a
			// word; its term and index are unknown, so it may be the
			// newest.
			rep.damaged = append(rep.damaged, err)
			continue
		}
		metas = append(metas, meta)
	}
	slices.SortFunc(metas, func(a, b *snapshotMeta) int { // newest first, raft's order
		switch {
		case a.Term != b.Term:
			return cmpDesc(a.Term, b.Term)
		case a.Index != b.Index:
			return cmpDesc(a.Index, b.Index)
		}
		return strings.Compare(b.ID, a.ID)
	})
	for _, m := range metas {
		if err := verifySnapshotState(filepath.Join(dir, m.ID), m); err != nil {
			rep.damaged = append(rep.damaged, err)
			continue
		}
		rep.restorable = m
		break
	}
	return rep, nil
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func readSnapshotMeta(snapDir string) (*snapshotMeta, *DamageError) {
	path := filepath.Join(snapDir, snapshotMetaFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &DamageError{File: path, Problem: "cannot be read", Err: err}
	}
	var m snapshotMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &DamageError{File: path, Problem: "is not valid snapshot metadata", Err: err}
	}
	if m.ID != filepath.Base(snapDir) || len(m.CRC) == 0 {
		return nil, &DamageError{File: path, Problem: fmt.Sprintf("names snapshot %q with CRC %x; want snapshot %q with a CRC", m.ID, m.CRC, filepath.Base(snapDir))}
	}
	return &m, nil
}

func verifySnapshotState(snapDir string, m *snapshotMeta) *DamageError {
	path := filepath.Join(snapDir, snapshotStateFile)
	f, err := os.Open(path)
	if err != nil {
		return &DamageError{File: path, Problem: "cannot be opened", Err: err}
	}
	defer func() { _ = f.Close() }()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	n, err := io.Copy(h, f)
	switch {
	case err != nil:
		return &DamageError{File: path, Problem: "cannot be read", Err: err}
	case n != m.Size:
		return &DamageError{File: path, Problem: fmt.Sprintf("has %d bytes; its meta.json records %d (truncated?)", n, m.Size)}
	case !bytes.Equal(h.Sum(nil), m.CRC):
		return &DamageError{File: path, Problem: fmt.Sprintf("fails its CRC-64 (computed %x, meta.json records %x)", h.Sum(nil), m.CRC)}
	}
	return nil
}

// base is the index of the snapshot raft will restore, 0 if none.
func (r snapshotReport) base() uint64 {
	if r.restorable == nil {
		return 0
	}
	return r.restorable.Index
}

// checkCoverage refuses snapshots and a log that together do not hold the
// whole history: every entry after the snapshot raft will restore must be
// in the log. A damaged newer snapshot is then harmless (raft restores the
// older one and replays the log), and reported as a warning by the caller;
// otherwise the damaged snapshot is what is named.
func checkCoverage(raftDir, dbPath string, rep snapshotReport, log logStats) error {
	if log.missing == 0 {
		return nil
	}
	usable := "no snapshot verifies"
	if rep.restorable != nil {
		usable = fmt.Sprintf("the newest snapshot that verifies ends at index %d", rep.base())
	}
	lost := fmt.Sprintf("%s and the log (%d to %d) lacks entry %d", usable, log.first, log.last, log.missing)
	if len(rep.damaged) > 0 {
		d := *rep.damaged[0]
		d.Problem += "; " + lost + ", so the history cannot be rebuilt from this data dir"
		return &d
	}
	return &DamageError{File: dbPath, Problem: "log entries are missing: " + lost}
}
