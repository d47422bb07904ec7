package state

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"
)

// StateStore is the in-memory state of the cluster: the objects every
// server builds by applying the raft log. Only the FSM writes to it (the
// write methods and Restore); everything else reads through Snapshot,
// SnapshotMinIndex and BlockingQuery.
//
// Objects read from the store are shared and immutable: to change one, clone
// it (CloneVT) and write the copy through raft. Objects passed to the write
// methods become owned by the store; the caller must not use them again.
type StateStore struct {
	db atomic.Pointer[memdb.MemDB]

	// applied is the raft index of the last entry applied to the store,
	// including entries that changed nothing.
	applied atomic.Uint64
	// nodes counts the nodes table, which go-memdb cannot count cheaply.
	nodes atomic.Int64
	// rebuiltAt is the applied index of the last Restore (see
	// Snapshot.RebuiltAt). It is stored before the restored database and
	// read after it, so a snapshot of the restored database never sees an
	// older value.
	rebuiltAt atomic.Uint64

	mu sync.Mutex
	// appliedCh is closed and replaced each time applied advances; waiters
	// in SnapshotMinIndex select on it.
	appliedCh chan struct{}
	// abandonCh is closed when Restore replaces the whole database, so that
	// blocking queries watching the old one re-run against the new one.
	abandonCh chan struct{}
}

// NewStateStore returns an empty state store.
func NewStateStore() (*StateStore, error) {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, fmt.Errorf("create state database: %w", err)
	}
	s := &StateStore{appliedCh: make(chan struct{}), abandonCh: make(chan struct{})}
	s.db.Store(db)
	return s, nil
}

// LatestIndex returns the raft index of the last entry applied to the store.
func (s *StateStore) LatestIndex() uint64 {
	return s.applied.Load()
}

// NodeCount returns the number of nodes in the state.
func (s *StateStore) NodeCount() int {
	return int(s.nodes.Load())
}

// Snapshot returns a read-only, point-in-time view of the state. It is cheap
// (no copying) and never blocks writers.
func (s *StateStore) Snapshot() *Snapshot {
	return s.snapshot(nil)
}

func (s *StateStore) snapshot(ws memdb.WatchSet) *Snapshot {
	// Read the index first: the view taken afterwards holds at least it.
	index := s.applied.Load()
	txn := s.db.Load().Txn(false)
	return &Snapshot{txn: txn, ws: ws, index: index, rebuiltAt: s.rebuiltAt.Load()}
}

// SnapshotMinIndex waits until the store has applied index, then returns a
// snapshot that holds it. It returns an error wrapping ctx.Err() if ctx ends
// first, so callers can tell a deadline (context.DeadlineExceeded) from
// shutdown (context.Canceled).
func (s *StateStore) SnapshotMinIndex(ctx context.Context, index uint64) (*Snapshot, error) {
	for {
		s.mu.Lock()
		ch := s.appliedCh
		s.mu.Unlock()
		// Check after taking the channel so that no advance is missed.
		if s.applied.Load() >= index {
			return s.Snapshot(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for state index %d (at %d): %w", index, s.applied.Load(), ctx.Err())
		}
	}
}

// markApplied records that the entry at index has been applied and wakes
// SnapshotMinIndex waiters. Indexes never move backwards.
func (s *StateStore) markApplied(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.applied.Load() {
		return
	}
	s.applied.Store(index)
	close(s.appliedCh)
	s.appliedCh = make(chan struct{})
}

// MarkApplied records an entry at index that did not write to the store (an
// ignorable entry of an unknown type), so that waiters on its index proceed.
func (s *StateStore) MarkApplied(index uint64) {
	s.markApplied(index)
}

// abandonWatch returns the channel closed when the database is replaced.
func (s *StateStore) abandonWatch() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abandonCh
}

// replace swaps in a restored database and wakes every blocking query.
func (s *StateStore) replace(db *memdb.MemDB, applied uint64, nodes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebuiltAt.Store(applied)
	s.db.Store(db)
	s.nodes.Store(int64(nodes))
	close(s.abandonCh)
	s.abandonCh = make(chan struct{})
	s.applied.Store(applied)
	close(s.appliedCh)
	s.appliedCh = make(chan struct{})
}

// BlockingQuery runs query on fresh snapshots until the index it returns is
// greater than minIndex, or ctx ends. The reads query makes through its
// snapshot register watch channels, so it re-runs only when something it read
// changes, or when the whole state is restored from a raft snapshot.
//
// With minIndex zero, query runs once. When ctx ends (max wait reached or the
// caller gone), the last result stands and BlockingQuery returns its index
// with a nil error; query keeps its results in variables it closes over.
func (s *StateStore) BlockingQuery(ctx context.Context, minIndex uint64, query func(*Snapshot) (uint64, error)) (uint64, error) {
	for {
		abandon := s.abandonWatch()
		ws := memdb.NewWatchSet()
		index, err := query(s.snapshot(ws))
		if err != nil || minIndex == 0 || index > minIndex {
			return index, err
		}
		ws.Add(abandon)
		if ws.WatchCtx(ctx) != nil {
			return index, nil
		}
	}
}
