// Package plan is the leader's plan queue and plan applier: workers submit
// the plans their schedulers made, and one goroutine checks each against the
// newest state and commits through raft what still fits (docs/architecture.md, "Scheduling").
package plan

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// ErrDisabled is returned for plans submitted to, or still waiting in, the
// queue of a server that is not (or no longer) the leader. Workers resubmit
// on it once a leader is known.
var ErrDisabled = errors.New("plan queue is disabled")

// Queue holds submitted plans until the applier takes them: higher priority
// first, then first come first served. It is enabled only on the leader.
// Any number of goroutines may enqueue; one applier dequeues.
type Queue struct {
	mu      sync.Mutex
	enabled bool
	pending pendingHeap
	seq     uint64
	// ready holds a token while plans may be waiting, so the consumer
	// wakes without polling.
	ready chan struct{}
}

// QueueStats is a point-in-time view of the queue.
type QueueStats struct {
	// Depth is the number of plans waiting for the applier.
	Depth int
}

// pending is a plan waiting in the queue, with the future of its submitter.
type pending struct {
	plan   *droverv1.Plan
	future *Future
	seq    uint64
}

// NewQueue returns a disabled, empty queue.
func NewQueue() *Queue {
	return &Queue{ready: make(chan struct{}, 1)}
}

// SetEnabled enables or disables the queue. Disabling fails every waiting
// plan with ErrDisabled: this server is no longer the leader and will not
// apply them.
func (q *Queue) SetEnabled(enabled bool) {
	q.mu.Lock()
	q.enabled = enabled
	var flushed []*pending
	if !enabled {
		flushed = q.pending
		q.pending = nil
	}
	q.mu.Unlock()
	for _, p := range flushed {
		p.future.respond(nil, fmt.Errorf("plan of eval %s: %w", p.plan.GetEvalId(), ErrDisabled))
	}
}

// Enqueue submits a plan. The plan becomes the applier's: the caller must
// not change it afterwards.
func (q *Queue) Enqueue(p *droverv1.Plan) (*Future, error) {
	if p == nil {
		return nil, errors.New("enqueue plan: nil plan")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.enabled {
		return nil, fmt.Errorf("enqueue plan of eval %s: %w", p.GetEvalId(), ErrDisabled)
	}
	q.seq++
	f := newFuture()
	heap.Push(&q.pending, &pending{plan: p, future: f, seq: q.seq})
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return f, nil
}

// Stats returns the queue's depth.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return QueueStats{Depth: len(q.pending)}
}

// dequeue blocks until a plan is waiting or ctx ends. Only one goroutine
// may call it: a single wake-up token serves a single consumer.
func (q *Queue) dequeue(ctx context.Context) (*pending, error) {
	for {
		q.mu.Lock()
		if len(q.pending) > 0 {
			p := heap.Pop(&q.pending).(*pending)
			q.mu.Unlock()
			return p, nil
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pendingHeap orders plans by priority, highest first, then by arrival.
type pendingHeap []*pending

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	if pi, pj := h[i].plan.GetPriority(), h[j].plan.GetPriority(); pi != pj {
		return pi > pj
	}
	return h[i].seq < h[j].seq
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(*pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	n := len(old) - 1
	x := old[n]
	old[n] = nil // let the plan be collected
	*h = old[:n]
	return x
}

// Future is the answer to one submitted plan.
type Future struct {
	once   sync.Once
	done   chan struct{}
	result *droverv1.PlanResult
	err    error
}

func newFuture() *Future {
	return &Future{done: make(chan struct{})}
}

// respond sets the answer; later answers are ignored.
func (f *Future) respond(r *droverv1.PlanResult, err error) {
	f.once.Do(func() {
		f.result, f.err = r, err
		close(f.done)
	})
}

// Wait returns what the applier committed of the plan, or why it could not
// apply it. If ctx ends first the plan may still be applied later. The
// result shares the plan's allocations with the applier: read, never modify.
func (f *Future) Wait(ctx context.Context) (*droverv1.PlanResult, error) {
	select {
	case <-f.done:
		return f.result, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for plan result: %w", ctx.Err())
	}
}
