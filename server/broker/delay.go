package broker

import (
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// delayLocked holds ev until due: evaluations whose wait_until lies in the
// future and nacked ones waiting out their redelivery delay. One watcher
// goroutine serves the whole heap.
func (b *Broker) delayLocked(ev *droverv1.Evaluation, due time.Time) {
	e := b.entryOf(ev)
	e.due = due
	b.delayed.push(e)
	if b.delayed.peek().seq == e.seq {
		// The watcher sleeps until the previous head; wake it to re-arm.
		select {
		case b.delayWake <- struct{}{}:
		default:
		}
	}
}

// watchDelayed enqueues held evaluations as they become due, until stop is
// closed.
func (b *Broker) watchDelayed(wake <-chan struct{}, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var fire <-chan time.Time
		if next, ok := b.releaseDue(time.Now()); ok {
			timer.Reset(time.Until(next))
			fire = timer.C
		} else {
			timer.Stop()
		}
		select {
		case <-stop:
			return
		case <-wake:
		case <-fire:
		}
	}
}

// releaseDue enqueues every held evaluation due by now and returns when
// the next one is due, if any.
func (b *Broker) releaseDue(now time.Time) (next time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return time.Time{}, false
	}
	for b.delayed.len() > 0 {
		head := b.delayed.peek()
		if head.due.After(now) {
			return head.due, true
		}
		b.delayed.pop()
		// A nacked evaluation still holds its job's slot, a fresh one
		// queues behind whatever its job has out.
		b.enqueueLocked(head.ev, queueOf(head.ev))
	}
	return time.Time{}, false
}
