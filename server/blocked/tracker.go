// Package blocked tracks, on the leader, the evaluations that could not
// place everything for lack of capacity, one per job, and hands them back
// to the eval broker when capacity appears on a node that could host them.
//
// Callers are the FSM apply path (Block, Unblock, Untrack) and the
// Eval.Reblock RPC (Reblock). The tracker never calls the broker while it
// holds its own lock, so those callers never wait on the broker's queues.
package blocked

import (
	"log/slog"
	"sync"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	// PruneInterval is how often the owner should call Prune.
	PruneInterval = 5 * time.Minute
	// PruneAge is how long a recorded unblock is remembered. An evaluation
	// computed on a snapshot older than that has long been reblocked or
	// replaced.
	PruneAge = 15 * time.Minute
)

// Enqueuer receives released evaluations with the token each was dequeued
// under ("" for none). The eval broker implements it.
type Enqueuer interface {
	EnqueueAll(evals map[*droverv1.Evaluation]string)
}

// tracked is a blocked evaluation and the token it was reblocked under.
type tracked struct {
	ev    *droverv1.Evaluation
	token string
}

// unblockMark is the newest unblock of one computed node class.
type unblockMark struct {
	index uint64
	at    time.Time
}

// Tracker holds the blocked evaluations. It is safe for concurrent use.
type Tracker struct {
	broker Enqueuer
	logger *slog.Logger
	// now stamps recorded unblocks for Prune; tests replace it.
	now func() time.Time

	mu      sync.Mutex
	enabled bool
	// captured: evaluations whose constraints are expressed by computed
	// node classes, by eval id; escaped: those whose constraints are not,
	// so any capacity anywhere may help them.
	captured map[string]tracked
	escaped  map[string]tracked
	// jobs: the one tracked evaluation of each job, by job id.
	jobs map[string]string
	// unblocks: per computed class, the newest unblock, to catch evals
	// that were being scheduled on an older snapshot when it happened.
	unblocks   map[string]unblockMark
	duplicates []*droverv1.Evaluation
}

// Stats counts the tracked evaluations.
type Stats struct {
	// Blocked is every tracked evaluation, escaped ones included.
	Blocked int
	// Escaped is those released by a capacity change on any class.
	Escaped int
}

// New returns a disabled tracker releasing into broker. A nil logger
// discards.
func New(broker Enqueuer, logger *slog.Logger) *Tracker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &Tracker{broker: broker, logger: logger, now: time.Now}
	t.resetLocked()
	return t
}

// resetLocked forgets everything.
func (t *Tracker) resetLocked() {
	t.captured = make(map[string]tracked)
	t.escaped = make(map[string]tracked)
	t.jobs = make(map[string]string)
	t.unblocks = make(map[string]unblockMark)
	t.duplicates = nil
}

// SetEnabled turns the tracker on (on gaining leadership) or off (on
// losing it). Disabling forgets everything; the next leader rebuilds it
// from the evaluations stored as blocked.
func (t *Tracker) SetEnabled(enabled bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.enabled == enabled {
		return
	}
	t.enabled = enabled
	t.resetLocked()
}

// Stats returns the current counts.
func (t *Tracker) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{Blocked: len(t.captured) + len(t.escaped), Escaped: len(t.escaped)}
}

// TakeDuplicates removes and returns the blocked evaluations superseded by
// a newer blocked evaluation of the same job. The leader cancels them
// through raft.
func (t *Tracker) TakeDuplicates() []*droverv1.Evaluation {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.duplicates
	t.duplicates = nil
	return d
}

// Prune forgets recorded unblocks older than PruneAge. The owner calls it
// every PruneInterval while leader.
func (t *Tracker) Prune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	cutoff := t.now().Add(-PruneAge)
	for class, m := range t.unblocks {
		if m.at.Before(cutoff) {
			delete(t.unblocks, class)
		}
	}
}

// release hands evaluations to the broker; never called with t.mu held.
func (t *Tracker) release(evals map[*droverv1.Evaluation]string) {
	if len(evals) > 0 {
		t.broker.EnqueueAll(evals)
	}
}
