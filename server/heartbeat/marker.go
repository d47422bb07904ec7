package heartbeat

import (
	"context"
	"time"
)

// mark is the marker goroutine of term tm: it takes expired nodes off the
// queues one at a time and hands them to the ExpireFunc, re-checks first
// and the pending queue at a throttled rate while the mass-failure guard
// is engaged.
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
		// A re-check is no news of a failure, so it never waits for the
		// throttle's tokens.
		if e := t.rechecks.pop(); e != nil {
			t.startMarking(e)
			t.mu.Unlock()
			return e
		}
		if t.pending.len() == 0 {
			ev, again := t.guard.queueEmptied(time.Now(), len(t.nodes))
			t.mu.Unlock()
			ev.log(t.logger, t.cfg)
			if !waitForWork(ctx, tm, again) {
				return nil
			}
			continue
		}
		throttled := t.guard.engaged
		t.mu.Unlock()

		// Waiting here, before taking a node, lets the nodes that heartbeat
		// during the wait leave the queue unmarked.
		if throttled && !t.awaitToken(ctx, tm) {
			if ctx.Err() != nil {
				return nil
			}
			continue // a re-check arrived: take it first
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
		t.startMarking(e)
		t.guard.markedOne()
		t.mu.Unlock()
		return e
	}
}

// startMarking moves e, just taken off its queue, to state marking. The
// caller holds mu.
func (t *Timers) startMarking(e *entry) {
	e.state = marking
	t.marked++
}

// awaitToken waits for the throttle's next token and reports whether it got
// one. It gives up, handing the token back, when ctx ends or a re-check is
// queued meanwhile, so that the re-check never sits out a failed node's
// turn at the throttled rate.
func (t *Timers) awaitToken(ctx context.Context, tm *term) bool {
	r := t.limiter.Reserve()
	if !r.OK() {
		// Only a limiter that can never grant a token refuses; Validate
		// rules that out, and marking unthrottled beats never marking.
		return true
	}
	delay := r.Delay()
	if delay == 0 {
		return true
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-tm.rechecked:
	case <-ctx.Done():
	}
	r.Cancel()
	return false
}

// waitForWork blocks until a node is queued, again has passed (when it is
// above 0), or ctx ends; it returns false in the last case.
func waitForWork(ctx context.Context, tm *term, again time.Duration) bool {
	var after <-chan time.Time
	if again > 0 {
		timer := time.NewTimer(again)
		defer timer.Stop()
		after = timer.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-tm.wake:
	case <-tm.rechecked:
	case <-after:
	}
	return true
}

// settle records the ExpireFunc's decision for e: a node that stays tracked
// gets a normal TTL plus grace and, from then on until its next Reset, its
// expiries are re-checks; any other is forgotten until its next Reset.
// It does nothing when the node was reset or the term ended while
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
	e.recheck = true
	// The timer fired and its callback has returned (it queued e), so it
	// can be reused.
	e.timer.Reset(t.cfg.TTL(len(t.nodes)) + t.cfg.Grace)
}
