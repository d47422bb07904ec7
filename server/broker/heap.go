package broker

import (
	"container/heap"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// entry is an evaluation in one of the broker's heaps.
type entry struct {
	ev *droverv1.Evaluation
	// seq is the broker-wide insertion number, the last tie-break.
	seq uint64
	// due is when a delayed entry becomes ready.
	due time.Time
}

// heapOf is a binary heap ordered by less, the smallest first.
type heapOf[T any] struct {
	items []T
	less  func(a, b T) bool
}

// heapAdapter gives heapOf the methods of heap.Interface without
// exporting them on heapOf itself.
type heapAdapter[T any] struct{ h *heapOf[T] }

func (a heapAdapter[T]) Len() int           { return len(a.h.items) }
func (a heapAdapter[T]) Less(i, j int) bool { return a.h.less(a.h.items[i], a.h.items[j]) }
func (a heapAdapter[T]) Swap(i, j int)      { a.h.items[i], a.h.items[j] = a.h.items[j], a.h.items[i] }
func (a heapAdapter[T]) Push(x any)         { a.h.items = append(a.h.items, x.(T)) }
func (a heapAdapter[T]) Pop() any {
	old := a.h.items
	n := len(old) - 1
	x := old[n]
	var zero T
	old[n] = zero // let the evaluation be collected
	a.h.items = old[:n]
	return x
}

func (h *heapOf[T]) len() int { return len(h.items) }
func (h *heapOf[T]) push(x T) { heap.Push(heapAdapter[T]{h}, x) }
func (h *heapOf[T]) pop() T   { return heap.Pop(heapAdapter[T]{h}).(T) }

// peek returns the smallest item; the heap must not be empty.
func (h *heapOf[T]) peek() T { return h.items[0] }

// newReadyHeap orders a scheduler's ready evaluations: higher priority
// first, then older (lower create index) first, then first come first
// served.
func newReadyHeap() *heapOf[entry] {
	return &heapOf[entry]{less: func(a, b entry) bool {
		if a.ev.GetPriority() != b.ev.GetPriority() {
			return a.ev.GetPriority() > b.ev.GetPriority()
		}
		if a.ev.GetCreateIndex() != b.ev.GetCreateIndex() {
			return a.ev.GetCreateIndex() < b.ev.GetCreateIndex()
		}
		return a.seq < b.seq
	}}
}

// newPendingHeap orders the evaluations waiting behind their job's
// current one: higher priority first, then the newest (highest modify
// index, then latest arrival), because the newest one covers the state the
// older ones were created for.
func newPendingHeap() *heapOf[entry] {
	return &heapOf[entry]{less: func(a, b entry) bool {
		if a.ev.GetPriority() != b.ev.GetPriority() {
			return a.ev.GetPriority() > b.ev.GetPriority()
		}
		if a.ev.GetModifyIndex() != b.ev.GetModifyIndex() {
			return a.ev.GetModifyIndex() > b.ev.GetModifyIndex()
		}
		return a.seq > b.seq
	}}
}

// newDelayHeap orders held evaluations by when they become due.
func newDelayHeap() *heapOf[entry] {
	return &heapOf[entry]{less: func(a, b entry) bool {
		if !a.due.Equal(b.due) {
			return a.due.Before(b.due)
		}
		return a.seq < b.seq
	}}
}
