package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// waiter is a Dequeue call waiting for one of its queues to get an
// evaluation. It is handed exactly one delivery, under the broker's lock.
type waiter struct {
	queues []queueName
	ch     chan delivery // buffered 1
}

// delivery is what a waiter is handed: an evaluation with its token, or
// ErrDisabled.
type delivery struct {
	ev    *droverv1.Evaluation
	token string
	err   error
}

// Dequeue hands out the highest-priority ready evaluation among the given
// scheduler types (ties between types broken at random) with a fresh
// token, and starts its nack timer. With nothing ready it waits up to
// timeout (forever if timeout <= 0) and returns (nil, "", nil) when the
// timeout passes; it returns ctx.Err() if ctx ends first and ErrDisabled
// if the broker is or becomes disabled.
func (b *Broker) Dequeue(ctx context.Context, schedulers []droverv1.JobType, timeout time.Duration) (*droverv1.Evaluation, string, error) {
	queues, err := queuesOf(schedulers)
	if err != nil {
		return nil, "", err
	}
	return b.dequeue(ctx, queues, timeout)
}

// DequeueFailed hands out an evaluation that exhausted its delivery limit,
// as Dequeue does. The leader marks it failed through raft with a
// follow-up evaluation, then acks it; its job stays serialized until then.
func (b *Broker) DequeueFailed(ctx context.Context, timeout time.Duration) (*droverv1.Evaluation, string, error) {
	return b.dequeue(ctx, []queueName{failedQueue}, timeout)
}

// queuesOf validates the requested scheduler types and drops repeats, so
// a type named twice does not win cross-type ties twice as often.
func queuesOf(schedulers []droverv1.JobType) ([]queueName, error) {
	if len(schedulers) == 0 {
		return nil, errors.New("dequeue requires at least one scheduler type")
	}
	queues := make([]queueName, 0, len(schedulers))
	for _, s := range schedulers {
		if s < 0 {
			return nil, fmt.Errorf("dequeue: unknown scheduler type %d", s)
		}
		if q := queueName(s); !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	return queues, nil
}

func (b *Broker) dequeue(ctx context.Context, queues []queueName, timeout time.Duration) (*droverv1.Evaluation, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	b.mu.Lock()
	if !b.enabled {
		b.mu.Unlock()
		return nil, "", ErrDisabled
	}
	if ev, q, ok := b.popReadyLocked(queues); ok {
		token := b.deliverLocked(ev, q)
		b.mu.Unlock()
		return ev, token, nil
	}
	w := &waiter{queues: queues, ch: make(chan delivery, 1)}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case d := <-w.ch:
		return d.ev, d.token, d.err
	case <-ctx.Done():
	case <-expired:
	}
	return b.abandon(ctx, w)
}

// abandon withdraws a waiter whose timeout passed or whose ctx ended. If an
// evaluation was handed to it meanwhile, a timed-out caller still takes it;
// for a canceled caller it goes back to its queue, since nobody would
// work on it.
func (b *Broker) abandon(ctx context.Context, w *waiter) (*droverv1.Evaluation, string, error) {
	b.mu.Lock()
	if i := slices.Index(b.waiters, w); i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
		b.mu.Unlock()
		return nil, "", ctx.Err()
	}
	b.mu.Unlock()

	d := <-w.ch // sent under the lock when the waiter was taken off the list
	if d.err != nil {
		return nil, "", d.err
	}
	if err := ctx.Err(); err != nil {
		b.undeliver(d.ev.GetId(), d.token)
		return nil, "", err
	}
	return d.ev, d.token, nil
}

// popReadyLocked takes the head of the requested ready queue whose head
// has the highest priority, choosing uniformly among equal ones.
func (b *Broker) popReadyLocked(queues []queueName) (*droverv1.Evaluation, queueName, bool) {
	var best queueName
	var bestPriority int32
	ties := 0
	for _, q := range queues {
		r := b.ready[q]
		if r == nil || r.len() == 0 {
			continue
		}
		p := r.peek().ev.GetPriority()
		switch {
		case ties == 0 || p > bestPriority:
			best, bestPriority, ties = q, p, 1
		case p == bestPriority:
			ties++
			if rand.IntN(ties) == 0 {
				best = q
			}
		}
	}
	if ties == 0 {
		return nil, 0, false
	}
	return b.ready[best].pop().ev, best, true
}

// takeWaiterLocked removes and returns the longest-waiting dequeuer of q.
func (b *Broker) takeWaiterLocked(q queueName) *waiter {
	for i, w := range b.waiters {
		if slices.Contains(w.queues, q) {
			b.waiters = slices.Delete(b.waiters, i, i+1)
			return w
		}
	}
	return nil
}

// deliverLocked marks ev, taken from q, as outstanding under a new token.
func (b *Broker) deliverLocked(ev *droverv1.Evaluation, q queueName) string {
	token := uuid.NewString()
	b.evals[ev.GetId()].deliveries++
	u := &unacked{ev: ev, token: token, queue: q}
	b.unack[ev.GetId()] = u
	b.unackedBy[q]++
	b.startTimerLocked(u)
	return token
}

// undeliver takes back an evaluation handed to a caller that went away,
// without counting the delivery.
func (b *Broker) undeliver(evalID, token string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.unack[evalID]
	if !b.enabled || u == nil || u.token != token {
		return
	}
	b.dropUnackedLocked(u)
	b.evals[evalID].deliveries--
	b.pushReadyLocked(u.ev, u.queue)
}
