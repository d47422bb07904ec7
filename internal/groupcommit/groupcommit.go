package rpc

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// committer writes items submitted by concurrent calls together, in shared
// raft entries: one disk write, one round of replication and one FSM
// transaction for many callers.
//
// With a window, the first item of a group starts a timer and the group is
// written when it fires. Agents' allocation reports use it: the agent does
// not wait for anything, and a window's worth of reports from the whole
// fleet becomes one entry. Without a window it is a group commit: an item is
// written at once if none of the committer's entries is in flight, and
// otherwise together with everything that arrived meanwhile as soon as the
// one in flight lands. A lone caller waits for nothing; many callers share
// entries, and the more they are, the larger the entries.
//
// Either way a group is written as soon as its weight reaches maxWeight, and
// no group is heavier than maxWeight unless one item alone is, so entries
// stay small enough to replicate and apply quickly.
type committer[T any] struct {
	window    time.Duration
	maxWeight int
	// write turns the items into one raft entry and applies it.
	write func(items []T) (index uint64, response any, err error)

	mu       sync.Mutex
	pending  *commitGroup[T]
	inflight bool
}

// commitGroup is the items written in one entry and, once written, the
// outcome they share.
type commitGroup[T any] struct {
	items  []T
	weight int
	done   chan struct{}

	// Set before done is closed.
	index    uint64
	response any
	err      error
}

// submit adds item to the next entry and waits until it has been applied.
// It returns the group and the item's position in it; the FSM's response
// says, per position, what became of each item. If ctx ends first the item
// is still written; only the wait is abandoned.
func (c *committer[T]) submit(ctx context.Context, item T, weight int) (*commitGroup[T], int, error) {
	g, pos := c.add(item, weight)
	select {
	case <-g.done:
		return g, pos, g.err
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("waiting for the write to be applied: %w", ctx.Err())
	}
}

func (c *committer[T]) add(item T, weight int) (*commitGroup[T], int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// An item that would take the pending group past the bound goes into
	// the next one; an item heavier than the bound goes alone.
	if g := c.pending; g != nil && len(g.items) > 0 && g.weight+weight > c.maxWeight {
		c.pending = nil
		go c.writeGroup(g)
	}
	if c.pending == nil {
		g := &commitGroup[T]{done: make(chan struct{})}
		c.pending = g
		if c.window > 0 {
			time.AfterFunc(c.window, func() { c.windowEnded(g) })
		}
	}
	g := c.pending
	pos := len(g.items)
	g.items = append(g.items, item)
	g.weight += weight
	switch {
	case g.weight >= c.maxWeight:
		c.pending = nil
		go c.writeGroup(g)
	case c.window == 0 && !c.inflight:
		c.pending = nil
		c.inflight = true
		go c.drain(g)
	}
	return g, pos
}

// windowEnded writes g, unless it was already written because it filled up.
func (c *committer[T]) windowEnded(g *commitGroup[T]) {
	c.mu.Lock()
	if c.pending != g {
		c.mu.Unlock()
		return
	}
	c.pending = nil
	c.mu.Unlock()
	c.writeGroup(g)
}

// drain writes g, then whatever gathered while it was in flight, until
// nothing is pending.
func (c *committer[T]) drain(g *commitGroup[T]) {
	for g != nil {
		c.writeGroup(g)
		c.mu.Lock()
		g = c.pending
		c.pending = nil
		if g == nil {
			c.inflight = false
		}
		c.mu.Unlock()
	}
}

func (c *committer[T]) writeGroup(g *commitGroup[T]) {
	g.index, g.response, g.err = c.write(g.items)
	close(g.done)
}
