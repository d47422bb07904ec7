package broker

import (
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Enqueue adds an evaluation the broker does not know yet; one it knows
// (same id) is dropped. An evaluation whose wait_until lies in the future
// is held until then. No-op while disabled.
func (b *Broker) Enqueue(ev *droverv1.Evaluation) {
	if ev == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	b.enqueueFreshLocked(ev)
}

// EnqueueAll adds evaluations together with the token each was dequeued
// under ("" for none). An evaluation currently outstanding under its token
// is stashed and enqueued afresh when that token is acked (dropped if it
// is nacked), so that a worker still holding it never races its
// successor; the others are enqueued as by Enqueue.
func (b *Broker) EnqueueAll(evals map[*droverv1.Evaluation]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	for ev, token := range evals {
		if ev == nil {
			continue
		}
		if u := b.unack[ev.GetId()]; token != "" && u != nil && u.token == token {
			b.requeue[token] = ev
			continue
		}
		b.enqueueFreshLocked(ev)
	}
}

// enqueueFreshLocked records a new evaluation and queues it now or at its
// wait_until.
func (b *Broker) enqueueFreshLocked(ev *droverv1.Evaluation) {
	if _, known := b.evals[ev.GetId()]; known {
		return
	}
	b.evals[ev.GetId()] = &evalState{}
	if until := ev.GetWaitUntil(); until > 0 {
		if due := time.Unix(0, until); due.After(time.Now()) {
			b.delayLocked(ev, due)
			return
		}
	}
	b.enqueueLocked(ev, queueOf(ev))
}

// enqueueLocked makes ev ready on queue q if its job has no other
// evaluation ready or in flight, and otherwise puts it in the job's
// pending heap: at most one evaluation per job is ever out.
func (b *Broker) enqueueLocked(ev *droverv1.Evaluation, q queueName) {
	job := ev.GetJobId()
	switch current, busy := b.jobEvals[job]; {
	case !busy:
		b.jobEvals[job] = ev.GetId()
	case current != ev.GetId():
		p := b.pending[job]
		if p == nil {
			p = newPendingHeap()
			b.pending[job] = p
		}
		p.push(b.entryOf(ev))
		b.pendingCount++
		return
	}
	b.pushReadyLocked(ev, q)
}

// pushReadyLocked hands ev to the longest-waiting dequeuer of q, or puts
// it on q's ready heap when nobody waits. A dequeuer waits only while all
// of its queues are empty, so handing over directly keeps priority order.
func (b *Broker) pushReadyLocked(ev *droverv1.Evaluation, q queueName) {
	if w := b.takeWaiterLocked(q); w != nil {
		token := b.deliverLocked(ev, q)
		w.ch <- delivery{ev: ev, token: token}
		return
	}
	r := b.ready[q]
	if r == nil {
		r = newReadyHeap()
		b.ready[q] = r
	}
	r.push(b.entryOf(ev))
}

// entryOf wraps ev with the next insertion number.
func (b *Broker) entryOf(ev *droverv1.Evaluation) entry {
	b.seq++
	return entry{ev: ev, seq: b.seq}
}
