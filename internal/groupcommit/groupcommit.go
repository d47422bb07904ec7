// Package groupcommit writes what concurrent callers submit together, in
// shared raft entries: one disk write, one round of replication and one FSM
// transaction for many callers. The rpc layer writes agents' reports,
// registrations and heartbeats' status changes through it, the leader's
// scheduling service the workers' evaluations.
package groupcommit

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Committer writes items submitted by concurrent calls together, in
// shared raft entries.
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
// Either way a group is written as soon as its weight reaches MaxWeight, and
// no group is heavier than MaxWeight unless one item alone is, so entries
// stay small enough to replicate and apply quickly. Set the fields before
// the first Submit and leave them.
type Committer[T any] struct {
	// Window is how long a group gathers items; zero is a group commit.
	Window time.Duration
	// MaxWeight bounds the weight of a group.
	MaxWeight int
	// Write turns the items into one raft entry and applies it.
	Write func(items []T) (index uint64, response any, err error)

	mu       sync.Mutex
	pending  *Group[T]
	inflight bool
}

// Group is the items written in one entry and, once written, the outcome
// they share: the entry's raft index, the FSM's response and the error.
type Group[T any] struct {
	items  []T
	weight int
	done   chan struct{}

	// Set before done is closed.
	Index    uint64
	Response any
	Err      error
}

// Submit adds item to the next entry and waits until it has been applied.
// It returns the group and the item's position in it; the FSM's response
// says, per position, what became of each item. If ctx ends first the item
// is still written; only the wait is abandoned.
func (c *Committer[T]) Submit(ctx context.Context, item T, weight int) (*Group[T], int, error) {
	g, pos := c.add(item, weight)
	select {
	case <-g.done:
		return g, pos, g.Err
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("waiting for the write to be applied: %w", ctx.Err())
	}
}

func (c *Committer[T]) add(item T, weight int) (*Group[T], int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// An item that would take the pending group past the bound goes into
	// the next one; an item heavier than the bound goes alone.
	if g := c.pending; g != nil && len(g.items) > 0 && g.weight+weight > c.MaxWeight {
		c.pending = nil
		go c.writeGroup(g)
	}
	if c.pending == nil {
		g := &Group[T]{done: make(chan struct{})}
		c.pending = g
		if c.Window > 0 {
			time.AfterFunc(c.Window, func() { c.windowEnded(g) })
		}
	}
	g := c.pending
	pos := len(g.items)
	g.items = append(g.items, item)
	g.weight += weight
	switch {
	case g.weight >= c.MaxWeight:
		c.pending = nil
		go c.writeGroup(g)
	case c.Window == 0 && !c.inflight:
		c.pending = nil
		c.inflight = true
		go c.drain(g)
	}
	return g, pos
}

// windowEnded writes g, unless it was already written because it filled up.
func (c *Committer[T]) windowEnded(g *Group[T]) {
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
func (c *Committer[T]) drain(g *Group[T]) {
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

func (c *Committer[T]) writeGroup(g *Group[T]) {
	g.Index, g.Response, g.Err = c.Write(g.items)
	close(g.done)
}

// Pending returns how many items wait for the next entry.
func (c *Committer[T]) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return 0
	}
	return len(c.pending.items)
}
