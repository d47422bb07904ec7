package scheduler

import (
	"sync"
	"weak"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// trimSlack is how many entries of gone nodes the usage cache may hold
// beyond twice the nodes of the state before it drops them: enough that a
// trim, which scans every entry, is rare.
const trimSlack = 1024

// maxBaseLayers bounds how many overlays a cached usage may lie on before
// a row is counted afresh: every port and address lookup walks the
// layers.
const maxBaseLayers = 4

// UsageCache keeps, for the schedulers of one server, the usage of each
// node's stored allocations: what they hold before a pass changes
// anything. Building a node's usage adds up every one of its allocations,
// and a pass placing many allocations visits every node, so without the
// cache each pass costs in proportion to all the allocations of the
// cluster. With it a pass takes a node's usage as an overlay of the cached
// one (fit.Usage.Overlay) while the node and its allocation row are those
// the entry was built from.
//
// Passes run concurrently from snapshots of different ages, so an entry
// is keyed by what it was built from (what the node offers, and the
// identity of its allocation row); a pass whose row differs builds its
// own and publishes it in place of the entry. A node version that shares
// the entry's resources and reservation objects (fit.SameOffer: the row
// was rewritten for the node's status or its last report) takes the entry
// over. A row that differs only in allocation versions that hold the same
// resources (an agent's report of a running allocation, which keeps the
// allocation's resources object) takes the entry over without a build. A row that only adds allocations
// to the entry's (a placement committed since) is counted as an overlay of
// the entry's usage with the new allocations on top, up to maxBaseLayers
// deep, then afresh. A usage is never returned for a row that would count
// differently. Entries of nodes that no longer exist are dropped once the
// cache holds more than twice the nodes of the state (plus trimSlack).
//
// A UsageCache is safe for concurrent use. The zero value is not usable:
// make one with NewUsageCache.
type UsageCache struct {
	mu      sync.RWMutex
	entries map[string]usageEntry
}

// usageEntry is one node's cached usage and what it was built from.
type usageEntry struct {
	// row is the first element of the allocation row the usage counts.
	// The pointer is weak so that the cache does not keep replaced rows
	// (and the old versions of their allocations) alive; a weak pointer
	// still tells a reclaimed array from a new one allocated at the same
	// address, which a plain address could not.
	row weak.Pointer[*droverv1.Allocation]
	// held says, position by position, what the row's allocations hold;
	// its length is the row's.
	held []heldAlloc
	// base is frozen; base.Node() is the node version it was last used for.
	base *fit.Usage
	// layers counts the overlays base lies on (zero: counted afresh).
	layers int
}

// heldAlloc is an allocation of a row as its usage counts it: its id, and
// its resources object if it holds resources (fit.Holds), else nil. Rows
// whose allocations match position by position count the same.
type heldAlloc struct {
	id  string
	res *droverv1.AllocatedResources
}

func heldOf(row []*droverv1.Allocation) []heldAlloc {
	out := make([]heldAlloc, len(row))
	for i, a := range row {
		out[i] = heldAlloc{id: a.GetId(), res: heldRes(a)}
	}
	return out
}

// heldRes is the resources object an allocation holds, or nil.
func heldRes(a *droverv1.Allocation) *droverv1.AllocatedResources {
	if fit.Holds(a) {
		return a.GetResources()
	}
	return nil
}

// holdsAsBefore reports whether row holds what held says, position by
// position: the same allocations hold the very same resources objects,
// and the others hold nothing.
func holdsAsBefore(held []heldAlloc, row []*droverv1.Allocation) bool {
	if len(held) != len(row) {
		return false
	}
	for i, a := range row {
		h := held[i]
		if h.res != heldRes(a) || (h.res != nil && h.id != a.GetId()) {
			return false
		}
	}
	return true
}

// addedTo returns the allocations row holds beyond what held says, when
// that is all that differs: every allocation held before is in row
// holding the very same resources object, and an allocation that held
// nothing may have gone. Both are in id order, as the state keeps rows.
// ok is false when row frees or changes something held.
func addedTo(held []heldAlloc, row []*droverv1.Allocation) (added []*droverv1.Allocation, ok bool) {
	i, j := 0, 0
	for i < len(held) || j < len(row) {
		switch {
		case i < len(held) && j < len(row) && held[i].id == row[j].GetId():
			if held[i].res != heldRes(row[j]) {
				return nil, false
			}
			i, j = i+1, j+1
		case j < len(row) && (i == len(held) || row[j].GetId() < held[i].id):
			if fit.Holds(row[j]) {
				added = append(added, row[j])
			}
			j++
		default: // held[i] is not in row
			if held[i].res != nil {
				return nil, false
			}
			i++
		}
	}
	return added, true
}

// NewUsageCache returns an empty cache, to share between every scheduler
// of a server through Config.UsageCache.
func NewUsageCache() *UsageCache {
	return &UsageCache{entries: make(map[string]usageEntry)}
}

// Base returns the frozen usage of row, the node's allocation row as the
// state stores it (State.NodeAllocsShared): cached when the node and the
// row are those of the entry, else built and published. The plan applier
// shares it to check relocated placements.
func (c *UsageCache) Base(node *droverv1.Node, row []*droverv1.Allocation) *fit.Usage {
	c.mu.RLock()
	e, ok := c.entries[node.GetId()]
	c.mu.RUnlock()
	if ok && fit.SameOffer(e.base.Node(), node) {
		if e.base.Node() != node {
			// The node's row was rewritten for its status or a report:
			// what its allocations hold against it is unchanged.
			e.base = e.base.ForNode(node)
			c.publish(node.GetId(), e)
		}
		if u := c.lookup(node.GetId(), e, row); u != nil {
			return u
		}
		if u := c.extend(node.GetId(), e, row); u != nil {
			return u
		}
	}
	_, _, u := fit.AllocsFit(node, row)
	u.Freeze() // before any other goroutine can see it
	c.publish(node.GetId(), usageEntry{row: rowKey(row), held: heldOf(row), base: u})
	return u
}

// lookup returns the usage of the node's entry e if it was built from
// this row, or from a row that holds the same; else nil.
func (c *UsageCache) lookup(nodeID string, e usageEntry, row []*droverv1.Allocation) *fit.Usage {
	if len(e.held) != len(row) {
		return nil
	}
	// An entry whose row was reclaimed has a nil Value, which no live row
	// (the caller holds its own) can match.
	if len(row) == 0 || e.row.Value() == &row[0] {
		return e.base
	}
	if !holdsAsBefore(e.held, row) {
		return nil
	}
	// The next pass on this row finds it by identity.
	e.row = rowKey(row)
	c.publish(nodeID, e)
	return e.base
}

// extend returns the usage of a row that only adds allocations to those
// of the node's entry e, laid over the entry's usage and published; else
// nil.
func (c *UsageCache) extend(nodeID string, e usageEntry, row []*droverv1.Allocation) *fit.Usage {
	if e.layers >= maxBaseLayers {
		return nil
	}
	added, ok := addedTo(e.held, row)
	if !ok {
		return nil
	}
	u := e.base
	if len(added) > 0 {
		u = u.Overlay()
		for _, a := range added {
			u.Add(a)
		}
		u.Freeze() // before any other goroutine can see it
		e.layers++
	}
	c.publish(nodeID, usageEntry{row: rowKey(row), held: heldOf(row), base: u, layers: e.layers})
	return u
}

// publish stores an entry, replacing whatever the node had: the newest
// build wins, whichever snapshot it came from.
func (c *UsageCache) publish(nodeID string, e usageEntry) {
	c.mu.Lock()
	c.entries[nodeID] = e
	c.mu.Unlock()
}

// rowKey is the weak identity of a row; an empty row has none, its
// length (zero) says it all.
func rowKey(row []*droverv1.Allocation) weak.Pointer[*droverv1.Allocation] {
	if len(row) == 0 {
		return weak.Pointer[*droverv1.Allocation]{}
	}
	return weak.Make(&row[0])
}

// trim drops the entries of nodes a state does not have, once the cache
// holds more than twice its nodes plus trimSlack. exists reports whether
// the state has the node; nodes is how many it has. A node dropped that a
// newer state has merely costs its next pass a build.
func (c *UsageCache) trim(nodes int, exists func(nodeID string) bool) {
	c.mu.RLock()
	over := len(c.entries) > 2*nodes+trimSlack
	c.mu.RUnlock()
	if !over {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.entries {
		if !exists(id) {
			delete(c.entries, id)
		}
	}
}
