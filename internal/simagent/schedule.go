package simagent

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// taskKind is one kind of work an agent does on the fleet's schedule.
type taskKind uint8

const (
	taskRegister taskKind = iota
	taskHeartbeat
	// taskReport sends the agent's allocation changes (UpdateAlloc).
	taskReport
	// taskAdvance moves allocations on in time (pending to running,
	// running batch work to complete).
	taskAdvance
	// taskFault takes a flaky agent offline or brings it back.
	taskFault
	numTaskKinds
)

// slot is one agent's entry for one kind of task. Each agent has one slot
// per kind, so a fleet's schedule holds at most a few entries per node and
// scheduling allocates nothing. A task never runs twice at once: asked to
// run while it runs, it runs again after.
type slot struct {
	agent *Agent
	kind  taskKind
	// due is when the task runs, in unix nanoseconds, while queued.
	due int64
	// index is the slot's position in the heap; -1 when not queued.
	index int
	// running is set while the task runs; again and againDue record a
	// request to run once more, at the earliest time asked for.
	running  bool
	again    bool
	againDue int64
}

// runFunc runs one task and returns when it wants to run next, if at all.
type runFunc func(ctx context.Context, s *slot) (next int64, ok bool)

// schedule runs agents' tasks when they are due: one heap of slots ordered
// by due time, one dispatching goroutine, and a goroutine per task while it
// runs, at most maxInFlight at once. Tens of thousands of agents cost no
// goroutine while they wait.
type schedule struct {
	run  runFunc
	sem  chan struct{}
	wake chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	heap slotHeap
}

func newSchedule(run runFunc, maxInFlight int) *schedule {
	return &schedule{run: run, sem: make(chan struct{}, maxInFlight), wake: make(chan struct{}, 1)}
}

// at asks for s to run at due, or earlier if it is already asked for an
// earlier time.
func (q *schedule) at(s *slot, due int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case s.running:
		if !s.again || due < s.againDue {
			s.again, s.againDue = true, due
		}
		return
	case s.index >= 0:
		if due >= s.due {
			return
		}
		s.due = due
		heap.Fix(&q.heap, s.index)
	default:
		s.due = due
		heap.Push(&q.heap, s)
	}
	if s.index == 0 {
		q.signal()
	}
}

func (q *schedule) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// finish ends a run of s and queues it again for next (if ok) or for a run
// asked for meanwhile, whichever is earlier.
func (q *schedule) finish(s *slot, next int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s.running = false
	if s.again && (!ok || s.againDue < next) {
		next, ok = s.againDue, true
	}
	s.again = false
	if !ok {
		return
	}
	s.due = next
	heap.Push(&q.heap, s)
	if s.index == 0 {
		q.signal()
	}
}

// loop dispatches due tasks until ctx ends, then waits for the tasks in
// flight to return.
func (q *schedule) loop(ctx context.Context) {
	defer q.wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s, wait := q.next(time.Now().UnixNano())
		if s != nil {
			if !q.dispatch(ctx, s) {
				return
			}
			continue
		}
		if wait > 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-timer.C:
		}
	}
}

// next pops the first slot if it is due, marking it running; otherwise it
// returns how long until it is (zero with nothing queued).
func (q *schedule) next(now int64) (*slot, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.heap) == 0 {
		return nil, 0
	}
	if first := q.heap[0]; first.due > now {
		return nil, time.Duration(first.due - now)
	}
	s := heap.Pop(&q.heap).(*slot)
	s.running = true
	return s, 0
}

// dispatch runs s in a goroutine once fewer than maxInFlight tasks run. It
// returns false if ctx ended first.
func (q *schedule) dispatch(ctx context.Context, s *slot) bool {
	select {
	case q.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	q.wg.Go(func() {
		defer func() { <-q.sem }()
		next, ok := q.run(ctx, s)
		if ctx.Err() != nil {
			ok = false
		}
		q.finish(s, next, ok)
	})
	return true
}

// slotHeap is a min-heap of slots by due time (container/heap).
type slotHeap []*slot

func (h slotHeap) Len() int           { return len(h) }
func (h slotHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h slotHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *slotHeap) Push(x any) {
	s := x.(*slot)
	s.index = len(*h)
	*h = append(*h, s)
}

func (h *slotHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.index = -1
	return s
}
