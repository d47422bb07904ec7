package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged marks a data dir that failed its start-up checks. A
// *DamageError carries the file and what is wrong.
var ErrDamaged = errors.New("data dir damaged")

// DamageError names a damaged file of the data dir and what is wrong.
type DamageError struct {
	// File is the path of the damaged file (or directory).
	File string
	// Problem says what is wrong, for people.
	Problem string
	// Err is the underlying error, if any.
	Err error
}

func (e *DamageError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s is damaged: %s: %v", e.File, e.Problem, e.Err)
	}
	return fmt.Sprintf("%s is damaged: %s", e.File, e.Problem)
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// Unwrap returns the underlying error.
func (e *DamageError) Unwrap() error { return e.Err }

// Paths of raft's state inside a server's data dir.
const (
	raftDirName = "raft"
	raftDBName  = "raft.db"
	// confBucket is raft-boltdb's bucket of the stable store.
	confBucket = "conf"
)

// RaftDir is the directory of raft's state in a data dir.
func RaftDir(dataDir string) string { return filepath.Join(dataDir, raftDirName) }

// StateExists reports whether a data dir holds raft state: a raft.db or a
// snapshot directory. A server whose data dir has state must never start
// as a new server.
func StateExists(dataDir string) bool {
	for _, p := range []string{
		filepath.Join(RaftDir(dataDir), raftDBName),
		filepath.Join(RaftDir(dataDir), snapshotsDir),
	} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// RecordedServerID returns the server id recorded in the data dir's
// raft.db, and false if there is none or raft.db cannot be read. It must
// not be called while a server has the data dir open.
func RecordedServerID(dataDir string) (id string, ok bool) {
	path := filepath.Join(RaftDir(dataDir), raftDBName)
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		return "", false
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: boltOpenTimeout})
	if err != nil {
		return "", false
	}
	defer func() { _ = db.Close() }()
	// A damaged file must not crash the caller; verifyBoltFile says what
	// is wrong with it later.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			id, ok = "", false
		}
	}()
	_ = db.View(func(tx *bbolt.Tx) error {
		if tx.Size() > fi.Size() {
			return nil // truncated: reading its pages would fault
		}
		if b := tx.Bucket([]byte(confBucket)); b != nil {
			id = string(b.Get(keyServerID))
		}
		return nil
	})
	return id, id != ""
}

// SetAside renames the raft state of a data dir out of the way, keeping it
// for forensics, and returns the new path. The next start finds no raft
// state.
func SetAside(dataDir string, now time.Time) (string, error) {
	from := RaftDir(dataDir)
	to := fmt.Sprintf("%s.damaged-%s", from, now.UTC().Format("20060102T150405Z"))
	if err := os.Rename(from, to); err != nil {
		return "", fmt.Errorf("set the raft state aside: %w", err)
	}
	return to, nil
}

// verifyBoltFile checks raft.db before the bolt store opens it for
// writing: that it has both meta pages, is as long as they say, and that
// its pages form a consistent tree (bbolt's own check). bbolt checksums only
// its meta pages; entries are verified by the checked store.
func verifyBoltFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil // a new server
	case err != nil:
		return &DamageError{File: path, Problem: "cannot be read", Err: err}
	case fi.Size() == 0:
		// bolt would quietly make an empty database of it: a server with
		// no state, under an id the cluster knows.
		return &DamageError{File: path, Problem: "is empty"}
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: boltOpenTimeout})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("open %s: another process holds its lock (is another server using this data dir?): %w", path, err)
	case err != nil:
		return &DamageError{File: path, Problem: "is not a valid bolt database", Err: err}
	}
	defer func() { _ = db.Close() }()
	return db.View(func(tx *bbolt.Tx) error {
		if want := tx.Size(); fi.Size() < want {
			// Reading the pages past the end would fault.
			return &DamageError{File: path, Problem: fmt.Sprintf("has %d bytes but its pages reach to byte %d (truncated?)", fi.Size(), want)}
		}
		var problems []string
		for err := range tx.Check() {
			if len(problems) < 5 {
				problems = append(problems, err.Error())
			}
		}
		if len(problems) > 0 {
			return &DamageError{File: path, Problem: "its page structure is inconsistent: " + strings.Join(problems, "; ")}
		}
		for _, name := range []string{"logs", confBucket} {
			if tx.Bucket([]byte(name)) == nil {
				return &DamageError{File: path, Problem: fmt.Sprintf("has no %q bucket", name)}
			}
		}
		return nil
	})
}

// verifyState checks, before raft starts, everything raft will read: the
// server id record, every log entry, and the snapshots raft would restore,
// and that together they hold the whole history. A memory fault while
// reading bolt's mapped pages (a file damaged in a way the checks above
// missed) is reported as damage rather than crashing the process.
func verifyState(store *checkedStore, raftDir, serverID string, logger *slog.Logger) (restorable *snapshotMeta, err error) {
	start := time.Now()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			restorable, err = nil, &DamageError{File: store.path, Problem: fmt.Sprintf("reading it faulted: %v", r)}
		}
	}()
	if err := store.checkOwner(serverID); err != nil {
		return nil, err
	}
	rep, err := verifySnapshots(raftDir)
	if err != nil {
		return nil, err
	}
	if rep.restorable == nil && len(rep.damaged) > 0 {
		// raft refuses to start when no snapshot it finds opens, even if
		// the log alone holds the whole history: report the damage, which
		// -rebuild-from-peers then repairs.
		return nil, rep.damaged[0]
	}
	snapTime := time.Since(start)
	logStats, err := store.verifyLog(rep.base())
	if err != nil {
		return nil, err
	}
	if err := checkCoverage(raftDir, store.path, rep, logStats); err != nil {
		return nil, err
	}
	for _, name := range rep.removedTemp {
		logger.Info("removed an incomplete snapshot", "dir", filepath.Join(raftDir, snapshotsDir, name))
	}
	for _, d := range rep.damaged {
		logger.Warn("a snapshot is damaged; raft restores an older one and replays the log, which covers the gap",
			"err", d, "restoring", snapshotName(rep.restorable))
	}
	attrs := []any{"log_first", logStats.first, "log_last", logStats.last, "snapshot", snapshotName(rep.restorable),
		"snapshot_verify_time", snapTime, "total_time", time.Since(start)}
	if logStats.unchecked > 0 {
		attrs = append(attrs, "entries_without_checksum", logStats.unchecked)
	}
	logger.Info("raft state verified", attrs...)
	return rep.restorable, nil
}

func snapshotName(m *snapshotMeta) string {
	if m == nil {
		return "none"
	}
	return m.ID
}

// Log is the raft log of a stopped server's data dir, opened by OpenLog:
// a raft.LogStore that writes entries with their checksums and verifies
// them when read, as the server does.
type Log struct {
	*checkedStore
}

// OpenLog opens the raft log of a data dir whose server is not running
// (bbolt locks the file), for tools and tests that read or append entries
// as the server would. Close it before the server starts again.
func OpenLog(dataDir string) (*Log, error) {
	path := filepath.Join(RaftDir(dataDir), raftDBName)
	if err := verifyBoltFile(path); err != nil {
		return nil, err
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions()})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	logger := slog.New(slog.DiscardHandler)
	store, err := newCheckedStore(bolt, path, newSpaceGuard(dataDir, 0, logger), logger)
	if err != nil {
		_ = bolt.Close()
		return nil, err
	}
	return &Log{store}, nil
}

// Close closes the log.
func (l *Log) Close() error { return l.bolt.Close() }
