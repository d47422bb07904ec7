package heartbeat

import (
	"context"
	"time"
)

// mark is the marker goroutine of term tm: it takes expired nodes off the
// pending queue one at a time and hands them to the ExpireFunc, at a
// throttled rate while the mass-failure guard is engaged.
func (t *Timers) mark(ctx context.Context, tm *term) {
	defer close(tm.finished)
	for {
		e := t.take(ctx, tm)
		if e == nil {
			return
		}
		keep := t.expire(ctx, e.id)
		t.settle(e, keep)
	}
}

// take waits for the next node to mark and returns its entry, now in state
// marking, or nil once ctx ends.
func (t *Timers) take(ctx context.Context, tm *term) *entry {
	for {
		t.mu.Lock()
		if t.pending.len() == 0 {
			ev, recheck := t.guard.queueEmptied(time.Now(), len(t.nodes))
			t.mu.Unlock()
			ev.log(t.logger, t.cfg)
			if !waitForWork(ctx, tm.wake, recheck) {
				return nil
			}
			continue
		}
		throttled := t.guard.engaged
		t.mu.Unlock()

		// Waiting here, before taking a node, lets the nodes that heartbeat
		// during the wait leave the queue unmarked.
		if throttled && t.limiter.Wait(ctx) != nil {
			return nil
		}

		t.mu.Lock()
		if ctx.Err() != nil {
			t.mu.Unlock()
			return nil
		}
		e := t.pending.pop()
		if e == nil {
			// Every queued node heartbeat during the wait.
			t.mu.Unlock()
			continue
		}
		e.state = marking
		t.marked++
		t.guard.markedOne()
		t.mu.Unlock()
		return e
	}
}

// waitForWork blocks until a node is queued, recheck has passed (when it is
// above 0), or ctx ends; it returns false in the last case.
func waitForWork(ctx context.Context, wake <-chan struct{}, recheck time.Duration) bool {
	var after <-chan time.Time
	if recheck > 0 {
		timer := time.NewTimer(recheck)
		defer timer.Stop()
		after = timer.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-after:
	}
	return true
}

// settle records the ExpireFunc's decision for e: a node that stays tracked
// gets a normal TTL plus grace, any other is forgotten until its next Reset.
// It does nothing when the node was reset, cleared or the term ended while
// it was being marked.
func (t *Timers) settle(e *entry, keepTracking bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.term == nil || t.nodes[e.id] != e || e.state != marking {
		return
	}
	if !keepTracking {
		delete(t.nodes, e.id)
		return
	}
	e.state = armed
	// The timer fired and its callback has returned (it queued e), so it
	// can be reused.
	e.timer.Reset(t.cfg.TTL(len(t.nodes)) + t.cfg.Grace)
}
