package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrNotLeader is returned by Reset when the timers are not started, that is
// when this server is not (or no longer) the leader.
var ErrNotLeader = errors.New("heartbeat timers not running: server is not the leader")

// ExpireFunc decides and writes what a missed heartbeat means for a node. It
// is called from one goroutine at a time, never with a lock held. It returns
// true when the node must stay tracked (it stays disconnected for now and its
// timer is to be armed again with a normal TTL plus grace). The expiries of
// that re-armed timer are re-checks: they neither count towards the
// mass-failure guard nor wait for its throttle.
type ExpireFunc func(ctx context.Context, nodeID string) (keepTracking bool)

// Stats describes the timers for metrics and operators.
type Stats struct {
	// Tracked counts the nodes with a timer, queued, or being marked.
	Tracked int
	// Pending counts the nodes expired, or due a re-check, and waiting for
	// the ExpireFunc.
	Pending int
	// Throttled is true while the mass-failure guard is engaged.
	Throttled bool
	// ThrottleEngagements counts the guard's engagements over the Timers' life.
	ThrottleEngagements uint64
	// Expired counts timer expiries over the Timers' life.
	Expired uint64
	// Marked counts ExpireFunc calls over the Timers' life.
	Marked uint64
}

// entryState is where a tracked node is in its heartbeat cycle.
type entryState int

const (
	// armed: the timer runs (or has just fired and its callback waits for the lock).
	armed entryState = iota
	// queued: the timer fired; the node waits in the pending queue.
	queued
	// marking: the marker is calling the ExpireFunc for the node.
	marking
)

// entry is one tracked node. An entry that is no longer the one in the map
// for its node is stale: a late timer callback or marker finding it does
// nothing.
type entry struct {
	id    string
	state entryState
	timer *time.Timer
	// recheck is set once the ExpireFunc kept the node tracked: its timer
	// now only re-checks a node already known to miss its heartbeats, so
	// its expiries are not news of a failure. Left to the guard, a large
	// disconnected share would keep it engaged and, throttled, spend its
	// tokens on checks that usually write nothing while nodes that really
	// failed wait.
	recheck bool
	// prev and next link the entry into its queue while queued.
	prev, next *entry
}

// term is one Start..Stop span of leadership.
type term struct {
	cancel  context.CancelFunc
	unwatch func() bool
	// wake is signalled when a node is queued for marking, rechecked when
	// one is queued for a re-check, so that a throttled wait ends for the
	// latter only.
	wake      chan struct{}
	rechecked chan struct{}
	finished  chan struct{}
}

// Timers is the leader's set of heartbeat timers, one per node, in memory
// only.
type Timers struct {
	cfg     Config
	expire  ExpireFunc
	logger  *slog.Logger
	limiter *rate.Limiter

	// lifecycle serialises Start and Stop, so one term's marker has returned
	// before the next term begins.
	lifecycle sync.Mutex

	mu    sync.Mutex
	term  *term // nil while not started
	nodes map[string]*entry
	// pending holds the expired nodes, marked at the guard's pace; rechecks
	// holds the re-check entries, taken first and never throttled.
	pending  pendingQueue
	rechecks pendingQueue
	guard    guard
	expired  uint64
	marked   uint64
}

// NewTimers returns stopped timers that call expire for nodes that miss
// their heartbeats.
func NewTimers(cfg Config, expire ExpireFunc, logger *slog.Logger) *Timers {
	if logger == nil {
		logger = slog.Default()
	}
	return &Timers{
		cfg:     cfg,
		expire:  expire,
		logger:  logger,
		limiter: rate.NewLimiter(rate.Limit(cfg.ThrottledMarkRate), 1),
		nodes:   make(map[string]*entry),
		guard:   guard{cfg: cfg},
	}
}

// Start begins tracking on a new leader: every node in nodeIDs gets the
// failover TTL (no stagger), so that an election never marks the fleet
// down: cfg.FailoverTTL, or longer for a fleet whose TTLs are longer. It starts the marker goroutine. ctx ends with leadership; when
// it ends the timers stop as if Stop had been called. Calling Start on
// started Timers, or with an invalid Config, is an error.
func (t *Timers) Start(ctx context.Context, nodeIDs []string) error {
	if err := t.cfg.Validate(); err != nil {
		return fmt.Errorf("start heartbeat timers: %w", err)
	}
	t.lifecycle.Lock()
	defer t.lifecycle.Unlock()

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.term != nil {
		return errors.New("start heartbeat timers: already started")
	}
	// The marker's context ends only through stop, which ctx's end calls:
	// a deadline on ctx would otherwise make the limiter refuse long waits
	// and end the marker while the timers still run.
	markCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tm := &term{
		cancel:    cancel,
		wake:      make(chan struct{}, 1),
		rechecked: make(chan struct{}, 1),
		finished:  make(chan struct{}),
	}
	tm.unwatch = context.AfterFunc(ctx, func() { t.stop(tm) })
	t.term = tm
	failover := t.cfg.failoverTTL(len(nodeIDs))
	for _, id := range nodeIDs {
		if _, dup := t.nodes[id]; !dup {
			t.nodes[id] = t.newEntry(id, failover)
		}
	}
	go t.mark(markCtx, tm)
	return nil
}

// Stop stops every timer, forgets them, drops the pending queue, and returns
// once the marker goroutine has returned (an ExpireFunc call in flight is
// cancelled through its ctx and awaited). It must not be called from an
// ExpireFunc.
func (t *Timers) Stop() {
	t.mu.Lock()
	tm := t.term
	t.mu.Unlock()
	if tm != nil {
		t.stop(tm)
	}
}

// stop ends term tm if it is still the current one.
func (t *Timers) stop(tm *term) {
	t.lifecycle.Lock()
	defer t.lifecycle.Unlock()

	t.mu.Lock()
	if t.term != tm {
		t.mu.Unlock()
		return
	}
	t.term = nil
	for _, e := range t.nodes {
		e.timer.Stop()
	}
	t.nodes = make(map[string]*entry)
	t.pending = pendingQueue{}
	t.rechecks = pendingQueue{}
	t.guard.reset()
	t.mu.Unlock()

	tm.unwatch()
	tm.cancel()
	<-tm.finished
}

// Reset is a heartbeat: it (re)arms the node's timer for ttl+Grace, where
// ttl = cfg.TTL(number of tracked nodes), and returns ttl, the value handed
// to the agent. A node queued for marking is taken off the queue: it will
// not be marked. Returns ErrNotLeader when the timers are not started.
func (t *Timers) Reset(nodeID string) (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.term == nil {
		return 0, fmt.Errorf("reset heartbeat timer of node %s: %w", nodeID, ErrNotLeader)
	}
	ttl := t.cfg.TTL(len(t.nodes))
	t.rearm(nodeID, ttl+t.cfg.Grace)
	return ttl, nil
}

// rearm arms nodeID's timer for d, tracking the node if it was not. The
// caller holds mu.
func (t *Timers) rearm(nodeID string, d time.Duration) {
	e := t.nodes[nodeID]
	switch {
	case e == nil:
	case e.state == armed && e.timer.Stop():
		// The hot path: the timer had not fired, so no callback can be
		// in flight and the timer can be reused. The node heartbeat, so
		// its next expiry is news again, not a re-check.
		e.recheck = false
		e.timer.Reset(d)
		return
	case e.state == queued:
		t.queueOf(e).remove(e)
		if !e.recheck {
			t.guard.cameBackOne()
		}
	}
	// The timer fired: its callback may still be waiting for the lock, or
	// the marker may be holding the entry. A fresh entry leaves both to
	// find theirs stale.
	t.nodes[nodeID] = t.newEntry(nodeID, d)
}

// newEntry returns an armed entry for nodeID whose timer fires after d.
func (t *Timers) newEntry(nodeID string, d time.Duration) *entry {
	e := &entry{id: nodeID}
	e.timer = time.AfterFunc(d, func() { t.fire(e) })
	return e
}

// Stats describes the timers now.
func (t *Timers) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{
		Tracked:             len(t.nodes),
		Pending:             t.pending.len() + t.rechecks.len(),
		Throttled:           t.guard.engaged,
		ThrottleEngagements: t.guard.engagements,
		Expired:             t.expired,
		Marked:              t.marked,
	}
}

// fire runs when e's timer expires: it queues the node for marking, and
// counts the expiry towards the guard unless it is a re-check.
func (t *Timers) fire(e *entry) {
	t.mu.Lock()
	if t.term == nil || t.nodes[e.id] != e || e.state != armed {
		t.mu.Unlock()
		return
	}
	e.state = queued
	t.queueOf(e).push(e)
	t.expired++
	var ev guardEvent
	wake := t.term.rechecked
	if !e.recheck {
		ev = t.guard.expired(time.Now(), len(t.nodes))
		wake = t.term.wake
	}
	t.mu.Unlock()

	select {
	case wake <- struct{}{}:
	default:
	}
	ev.log(t.logger, t.cfg)
}

// queueOf returns the queue e waits in while queued. The caller holds mu.
func (t *Timers) queueOf(e *entry) *pendingQueue {
	if e.recheck {
		return &t.rechecks
	}
	return &t.pending
}
