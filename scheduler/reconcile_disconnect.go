package scheduler

import (
	"cmp"
	"iter"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Disconnect and reconnect bookkeeping (DESIGN 6): an allocation on a node
// that missed its heartbeats becomes unknown, recorded by an AllocState
// entry; it needs reconnect handling while its last client-status entry
// says unknown, and the scheduler records the reconnect with a new entry.

// clientStatusesNewestFirst yields the allocation's client-status entries,
// newest first.
func clientStatusesNewestFirst(a *droverv1.Allocation) iter.Seq[*droverv1.AllocState] {
	return func(yield func(*droverv1.AllocState) bool) {
		states := a.GetAllocStates()
		for i := len(states) - 1; i >= 0; i-- {
			s := states[i]
			if s.GetField() != droverv1.AllocStateField_ALLOC_STATE_FIELD_CLIENT_STATUS ||
				s.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED {
				continue
			}
			if !yield(s) {
				return
			}
		}
	}
}

// needsReconnect reports whether the allocation's last recorded client
// status is unknown: it was disconnected and no reconnect has been
// recorded since.
func needsReconnect(a *droverv1.Allocation) bool {
	for s := range clientStatusesNewestFirst(a) {
		return s.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
	}
	return false
}

// disconnectExpired reports whether an unknown allocation's disconnect
// window is over: its deadline has passed, or the evaluation being
// processed is the follow-up created for that deadline (follow-ups are
// batched, so one may run a little before some of its allocations' own
// deadlines).
func disconnectExpired(a *droverv1.Allocation, group *droverv1.TaskGroup, now int64, evalID string) bool {
	if a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN {
		return false
	}
	if a.GetFollowupEvalId() != "" && a.GetFollowupEvalId() == evalID {
		return true
	}
	// Without an unknown entry the window counts from now, so it is not over.
	window := int64(group.GetMaxClientDisconnect().AsDuration())
	return window > 0 && a.DisconnectDeadline(window, now) <= now
}

// markReconnected records on a copy of an allocation that it is back: an
// entry with its current client status ends its need for reconnect
// handling, and the follow-up of its disconnect window no longer applies.
func markReconnected(c *droverv1.Allocation, now int64) {
	c.AllocStates = append(c.AllocStates, &droverv1.AllocState{
		Field:        droverv1.AllocStateField_ALLOC_STATE_FIELD_CLIENT_STATUS,
		ClientStatus: c.GetClientStatus(),
		Time:         now,
	})
	c.FollowupEvalId = ""
}

// pickReconnect chooses which of a reconnected allocation and one of its
// replacements keeps running: the one on the newer job version, otherwise
// as the group's strategy says.
func pickReconnect(original, replacement *droverv1.Allocation, strategy droverv1.ReconnectStrategy) *droverv1.Allocation {
	switch {
	case replacement.GetJobVersion() > original.GetJobVersion():
		return replacement
	case original.GetJobVersion() > replacement.GetJobVersion():
		return original
	}
	switch strategy {
	case droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_ORIGINAL:
		return original
	case droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_REPLACEMENT:
		return replacement
	case droverv1.ReconnectStrategy_RECONNECT_STRATEGY_LONGEST_RUNNING:
		if replacement.GetCreateTime() < original.GetCreateTime() {
			return replacement
		}
		return original
	}
	// Best score: the replacement only if it scored higher and switching
	// does not trade a running allocation for one that is not.
	if replacement.GetScore() > original.GetScore() && (isRunning(replacement) || !isRunning(original)) {
		return replacement
	}
	return original
}

func isRunning(a *droverv1.Allocation) bool {
	return a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
}

// resolveReconnects handles the group's allocations that came back from a
// disconnect: each is weighed against the live replacements placed for it
// and exactly one of them keeps running. It runs before classification;
// the allocations it stops are not classified again.
func (g *groupReconciler) resolveReconnects() {
	var back []*droverv1.Allocation
	for _, a := range g.ch.allocs {
		if g.reconnecting(a) {
			back = append(back, a)
		}
	}
	// Oldest first, so that an original is weighed before replacements that
	// were themselves disconnected.
	slices.SortFunc(back, func(a, b *droverv1.Allocation) int {
		return cmp.Or(cmp.Compare(a.GetCreateTime(), b.GetCreateTime()), cmp.Compare(a.GetId(), b.GetId()))
	})
	for _, a := range back {
		if !g.handled[a.GetId()] {
			g.resolveReconnect(a)
		}
	}
}

// reconnecting reports whether an allocation needs reconnect handling: it
// was disconnected, its node is back, and it has not failed, been stopped
// or run out its disconnect window.
func (g *groupReconciler) reconnecting(a *droverv1.Allocation) bool {
	if a.ServerTerminal() || a.ClientTerminal() || !needsReconnect(a) {
		return false
	}
	if !nodeBack(g.in.nodes[a.GetNodeId()]) {
		return false
	}
	return !disconnectExpired(a, g.group, g.in.now, g.in.evalID)
}

// nodeBack reports whether a node is connected: ready, or initializing
// after it came back.
func nodeBack(n *droverv1.Node) bool {
	switch n.GetStatus() {
	case droverv1.NodeStatus_NODE_STATUS_READY, droverv1.NodeStatus_NODE_STATUS_INITIALIZING:
		return true
	}
	return false
}

// resolveReconnect keeps one of a reconnected allocation and its live
// replacements, and stops the others along with failed replacements still
// waiting to be rescheduled. The decision waits until the allocation's
// agent has reported it and its node is ready: until then the replacement
// keeps running and the original is left alone (or, with no replacement,
// simply counted).
func (g *groupReconciler) resolveReconnect(orig *droverv1.Allocation) {
	var live, failed []*droverv1.Allocation
	for _, p := range g.links.chain(orig) {
		switch {
		case p.ServerTerminal() || g.handled[p.GetId()]:
		case p.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED:
			if !g.links.replaced(p) {
				failed = append(failed, p)
			}
		case !p.ClientTerminal() && nodeBack(g.in.nodes[p.GetNodeId()]):
			live = append(live, p)
		}
	}
	reported := orig.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
	if !reported || !nodeReady(g.in.nodes[orig.GetNodeId()]) {
		if len(live)+len(failed) > 0 {
			g.handled[orig.GetId()] = true
		}
		return
	}
	keep := orig
	for _, p := range live {
		keep = pickReconnect(keep, p, g.group.GetReconnectStrategy())
	}
	for _, a := range slices.Concat([]*droverv1.Allocation{orig}, live, failed) {
		if a == keep {
			continue
		}
		g.handled[a.GetId()] = true
		description := allocReconnected
		if a == orig {
			description = allocNotNeeded
		}
		g.ch.stop(a, description, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
	}
	if keep != orig {
		return
	}
	g.ch.reconnected(orig)
	if isRunning(orig) {
		markReconnected(g.ch.copyOf(orig), g.in.now)
	}
}
