// Package broker is the leader's eval broker: an in-memory set of priority
// queues, one per scheduler type, from which workers dequeue evaluations
// with a token and to which they ack or nack them. It serializes the
// evaluations of one job, redelivers those that are not acked in time,
// delays the redelivery of nacked ones, parks those past the delivery limit
// in a failed queue, holds those whose wait_until lies in the future, and
// collects the evaluations made redundant by a newer one of the same job.
//
// The broker is enabled only on the leader and is rebuilt from the state
// store after every election; disabling it forgets everything.
package broker

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Sentinel errors. Returned errors wrap them with the ids involved; match
// with errors.Is.
var (
	// ErrDisabled: the broker runs only on the leader.
	ErrDisabled = errors.New("eval broker disabled")
	// ErrNotFound: the broker does not know the evaluation at all.
	ErrNotFound = errors.New("evaluation ID not found")
	// ErrNotOutstanding: the evaluation is known but nobody holds it.
	ErrNotOutstanding = errors.New("evaluation is not outstanding")
	// ErrTokenMismatch: the evaluation is held under another token.
	ErrTokenMismatch = errors.New("evaluation token does not match")
	// ErrNackTimeoutReached: the token's nack timer fired; the evaluation
	// was taken back and the caller's work on it no longer counts.
	ErrNackTimeoutReached = errors.New("evaluation nack timeout reached")
)

// Config tunes redelivery. DefaultConfig holds the values Nomad's servers
// use, which operators of both know (docs/operations.md lists the flags).
type Config struct {
	// NackTimeout is how long a dequeued evaluation may stay unacked before
	// it is taken back as if nacked. Zero or less disables the timer.
	NackTimeout time.Duration
	// DeliveryLimit is the number of deliveries after which a nacked
	// evaluation goes to the failed queue instead of back to its own.
	DeliveryLimit int
	// InitialNackDelay delays the redelivery after the first nack.
	InitialNackDelay time.Duration
	// SubsequentNackDelay delays the redelivery after the n-th nack (n >= 2)
	// by (n-1) times itself.
	SubsequentNackDelay time.Duration
}

// DefaultConfig returns 60s / 3 deliveries / 1s / 20s: deliveries happen
// at once, 1s after the first nack and 20s after the second; the third
// nack sends the evaluation to the failed queue.
func DefaultConfig() Config {
	return Config{
		NackTimeout:         60 * time.Second,
		DeliveryLimit:       3,
		InitialNackDelay:    time.Second,
		SubsequentNackDelay: 20 * time.Second,
	}
}

// nackDelay is the wait before redelivering an evaluation that has been
// delivered deliveries times and was just nacked.
func (c Config) nackDelay(deliveries int) time.Duration {
	switch {
	case deliveries <= 0:
		return 0
	case deliveries == 1:
		return c.InitialNackDelay
	default:
		return time.Duration(deliveries-1) * c.SubsequentNackDelay
	}
}

// queueName names a ready queue: a scheduler type, or failedQueue.
type queueName int32

// failedQueue holds evaluations past the delivery limit. Its name lies
// outside the JobType values, so no worker can ask for it by mistake.
const failedQueue queueName = -1

// queueOf is the ready queue of an evaluation's scheduler.
func queueOf(ev *droverv1.Evaluation) queueName { return queueName(ev.GetType()) }

// evalState is what the broker remembers about an evaluation from its
// enqueue until its ack.
type evalState struct {
	deliveries int
	// expired holds the tokens whose nack timer fired, so that a late ack
	// under one of them is told so rather than "token mismatch".
	expired map[string]struct{}
}

// Broker is the eval broker. It is safe for concurrent use.
type Broker struct {
	cfg    Config
	logger *slog.Logger

	// enableMu serializes SetEnabled, which must release mu while it waits
	// for the delay watcher to stop.
	enableMu sync.Mutex

	mu      sync.Mutex
	enabled bool
	// evals: every evaluation known, by id (dedup and delivery counts).
	evals map[string]*evalState
	// jobEvals: per job id, the one evaluation that is ready, unacked,
	// waiting out a nack delay or in the failed queue.
	jobEvals map[string]string
	// pending: per job id, evaluations waiting behind jobEvals[job].
	pending      map[string]*heapOf[entry]
	pendingCount int
	ready        map[queueName]*heapOf[entry]
	unack        map[string]*unacked
	unackedBy    map[queueName]int
	// requeue: per token, an evaluation to enqueue afresh when the
	// evaluation dequeued under that token is acked.
	requeue    map[string]*droverv1.Evaluation
	delayed    *heapOf[entry]
	cancelable []*droverv1.Evaluation
	waiters    []*waiter
	// seq orders entries inserted with equal keys first-in first-out.
	seq uint64

	// The delay watcher's channels, replaced on every enable.
	delayWake chan struct{}
	delayStop chan struct{}
	delayDone chan struct{}
}

// New returns a disabled broker. A nil logger discards.
func New(cfg Config, logger *slog.Logger) *Broker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Broker{cfg: cfg, logger: logger}
	b.resetLocked()
	return b
}

// resetLocked forgets every evaluation.
func (b *Broker) resetLocked() {
	b.evals = make(map[string]*evalState)
	b.jobEvals = make(map[string]string)
	b.pending = make(map[string]*heapOf[entry])
	b.pendingCount = 0
	b.ready = make(map[queueName]*heapOf[entry])
	b.unack = make(map[string]*unacked)
	b.unackedBy = make(map[queueName]int)
	b.requeue = make(map[string]*droverv1.Evaluation)
	b.delayed = newDelayHeap()
	b.cancelable = nil
	b.waiters = nil
}

// SetEnabled turns the broker on (on gaining leadership) or off (on losing
// it). Disabling forgets every evaluation, stops every timer and the delay
// watcher, and makes waiting Dequeue calls return ErrDisabled.
func (b *Broker) SetEnabled(enabled bool) {
	b.enableMu.Lock()
	defer b.enableMu.Unlock()

	b.mu.Lock()
	if b.enabled == enabled {
		b.mu.Unlock()
		return
	}
	b.enabled = enabled
	if enabled {
		b.resetLocked()
		b.delayWake = make(chan struct{}, 1)
		b.delayStop = make(chan struct{})
		b.delayDone = make(chan struct{})
		go b.watchDelayed(b.delayWake, b.delayStop, b.delayDone)
		b.mu.Unlock()
		return
	}
	b.flushLocked()
	stop, done := b.delayStop, b.delayDone
	b.mu.Unlock()

	close(stop)
	<-done
}

// flushLocked stops every nack timer, turns waiting dequeuers away and
// forgets every evaluation.
func (b *Broker) flushLocked() {
	for _, u := range b.unack {
		u.stopTimer()
	}
	for _, w := range b.waiters {
		w.ch <- delivery{err: ErrDisabled}
	}
	b.resetLocked()
}

// Enabled reports whether the broker is on.
func (b *Broker) Enabled() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.enabled
}
