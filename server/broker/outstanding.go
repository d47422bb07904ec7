package broker

import (
	"fmt"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// unacked is an evaluation handed out and not yet acked or nacked.
type unacked struct {
	ev    *droverv1.Evaluation
	token string
	queue queueName
	// timer is the nack timer; nil while paused (or with no timeout).
	timer *time.Timer
	// timerGen tells a timer that fired from one stopped or replaced
	// since: only the current generation may take the evaluation back.
	timerGen uint64
}

// stopTimer stops the nack timer; a callback already running sees a stale
// generation and does nothing.
func (u *unacked) stopTimer() {
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
	u.timerGen++
}

// startTimerLocked (re)starts u's nack timer with the full timeout.
func (b *Broker) startTimerLocked(u *unacked) {
	u.stopTimer()
	if b.cfg.NackTimeout <= 0 {
		return
	}
	id, token, gen := u.ev.GetId(), u.token, u.timerGen
	u.timer = time.AfterFunc(b.cfg.NackTimeout, func() { b.nackTimerFired(id, token, gen) })
}

// nackTimerFired takes back an evaluation whose worker went quiet.
func (b *Broker) nackTimerFired(evalID, token string, gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.unack[evalID]
	if !b.enabled || u == nil || u.token != token || u.timerGen != gen {
		return
	}
	b.logger.Warn("eval nack timeout reached; taking it back", "eval_id", evalID, "job_id", u.ev.GetJobId())
	st := b.evals[evalID]
	if st.expired == nil {
		st.expired = make(map[string]struct{})
	}
	st.expired[token] = struct{}{}
	b.nackLocked(u)
}

// Ack completes an evaluation. The evaluations waiting behind it for the
// same job become cancelable except the top one (highest priority, then
// newest), which becomes ready; an evaluation stashed by EnqueueAll under
// this token is then enqueued afresh.
func (b *Broker) Ack(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	b.dropUnackedLocked(u)
	delete(b.evals, evalID)
	if job := u.ev.GetJobId(); b.jobEvals[job] == evalID {
		delete(b.jobEvals, job)
		b.promotePendingLocked(job)
	}
	if ev, ok := b.requeue[token]; ok {
		delete(b.requeue, token)
		b.enqueueFreshLocked(ev)
	}
	return nil
}

// promotePendingLocked makes the top pending evaluation of job its next
// one and the rest cancelable: the top one is at least as new, so its
// pass covers what they were created for.
func (b *Broker) promotePendingLocked(job string) {
	p := b.pending[job]
	if p == nil {
		return
	}
	delete(b.pending, job)
	b.pendingCount -= p.len()
	top := p.pop()
	for _, e := range p.items {
		b.cancelable = append(b.cancelable, e.ev)
	}
	b.enqueueLocked(top.ev, queueOf(top.ev))
}

// Nack gives an evaluation back: it is redelivered after a delay that grows
// with its deliveries, or goes to the failed queue once it reached the
// delivery limit. Its job stays serialized meanwhile. An evaluation stashed
// by EnqueueAll under this token is dropped.
func (b *Broker) Nack(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return fmt.Errorf("nack: %w", err)
	}
	b.nackLocked(u)
	return nil
}

// nackLocked re-queues an outstanding evaluation as Nack describes.
func (b *Broker) nackLocked(u *unacked) {
	b.dropUnackedLocked(u)
	delete(b.requeue, u.token)
	deliveries := b.evals[u.ev.GetId()].deliveries
	if deliveries >= b.cfg.DeliveryLimit {
		b.logger.Warn("eval reached delivery limit", "eval_id", u.ev.GetId(), "job_id", u.ev.GetJobId(), "deliveries", deliveries)
		b.enqueueLocked(u.ev, failedQueue)
		return
	}
	if d := b.cfg.nackDelay(deliveries); d > 0 {
		b.delayLocked(u.ev, time.Now().Add(d))
		return
	}
	b.enqueueLocked(u.ev, queueOf(u.ev))
}

// dropUnackedLocked forgets that u is outstanding.
func (b *Broker) dropUnackedLocked(u *unacked) {
	u.stopTimer()
	delete(b.unack, u.ev.GetId())
	b.unackedBy[u.queue]--
}

// OutstandingReset restarts the nack timer of an outstanding evaluation
// whose worker made progress. A paused timer stays paused.
func (b *Broker) OutstandingReset(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return fmt.Errorf("reset nack timeout: %w", err)
	}
	if u.timer != nil {
		b.startTimerLocked(u)
	}
	return nil
}

// PauseNackTimeout stops the nack timer while the evaluation's plan waits
// in the plan queue, whose wait the worker does not control.
func (b *Broker) PauseNackTimeout(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return fmt.Errorf("pause nack timeout: %w", err)
	}
	u.stopTimer()
	return nil
}

// ResumeNackTimeout restarts the nack timer with the full timeout once the
// plan is applied.
func (b *Broker) ResumeNackTimeout(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return fmt.Errorf("resume nack timeout: %w", err)
	}
	b.startTimerLocked(u)
	return nil
}

// Outstanding returns the token an evaluation is outstanding under.
func (b *Broker) Outstanding(evalID string) (token string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.unack[evalID]
	if !ok {
		return "", false
	}
	return u.token, true
}

// outstandingLocked finds the evaluation outstanding under token, or says
// why there is none.
func (b *Broker) outstandingLocked(evalID, token string) (*unacked, error) {
	if !b.enabled {
		return nil, ErrDisabled
	}
	st, known := b.evals[evalID]
	if known && st.tokenExpired(token) {
		return nil, fmt.Errorf("eval %s token %s: %w", evalID, token, ErrNackTimeoutReached)
	}
	u, ok := b.unack[evalID]
	switch {
	case ok && u.token == token:
		return u, nil
	case ok:
		return nil, fmt.Errorf("eval %s token %s: %w", evalID, token, ErrTokenMismatch)
	case known:
		return nil, fmt.Errorf("eval %s: %w", evalID, ErrNotOutstanding)
	default:
		return nil, fmt.Errorf("eval %s: %w", evalID, ErrNotFound)
	}
}

// tokenExpired reports whether the nack timer of token fired.
func (s *evalState) tokenExpired(token string) bool {
	_, ok := s.expired[token]
	return ok
}
