// Package rounds shares one operation among the calls waiting for it. A call
// joins the next round, never one already running, so every answer comes
// from an operation that began after the call did: what a consistent read
// needs of a leadership confirmation or a read index, where an operation
// that began earlier may predate a write the caller already saw
// acknowledged. Under load the cost is one operation per batch of calls,
// not per call.
package rounds

import (
	"context"
	"sync"
)

// Rounds runs its operation back to back while calls wait for it. It is
// safe for concurrent use.
type Rounds[T any] struct {
	run func() (T, error)

	mu      sync.Mutex
	next    *round[T] // the round calls arriving now will wait for
	running bool      // a goroutine is running rounds
}

// round is one run of the operation, shared by every call that joined it
// before it started.
type round[T any] struct {
	done    chan struct{}
	waiting int // calls joined; written under Rounds.mu
	val     T
	err     error
}

// New returns Rounds of run. run is called from a goroutine of its own,
// one call at a time; it must end by itself (bound it with a timeout).
func New[T any](run func() (T, error)) *Rounds[T] {
	return &Rounds[T]{run: run}
}

// Wait joins the next round and returns its result, or ctx's error if ctx
// ends first (the round still runs for the others).
func (r *Rounds[T]) Wait(ctx context.Context) (T, error) {
	rd := r.join()
	select {
	case <-rd.done:
		return rd.val, rd.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Waiting is how many calls wait for the round that has not started yet.
func (r *Rounds[T]) Waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		return 0
	}
	return r.next.waiting
}

// join returns the round that has not started yet, starting the goroutine
// that runs rounds if none is running.
func (r *Rounds[T]) join() *round[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next = &round[T]{done: make(chan struct{})}
	}
	rd := r.next
	rd.waiting++
	if !r.running {
		r.running = true
		go r.runRounds()
	}
	return rd
}

// runRounds runs rounds back to back while calls wait for them.
func (r *Rounds[T]) runRounds() {
	for {
		r.mu.Lock()
		rd := r.next
		r.next = nil
		if rd == nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		rd.val, rd.err = r.run()
		close(rd.done)
	}
}
