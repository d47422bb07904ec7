package state

import (
	"fmt"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// maxNodeEvents bounds a node's event history.
const maxNodeEvents = 10

// RegisterResult says which nodes of a NodeRegisterEntry were refused, and
// what the others are as stored.
type RegisterResult struct {
	// Errors holds, at the position of each node in the entry, nil or the
	// reason it was refused (ErrSecretMismatch, ErrInvalidEntry).
	Errors []error
	// Stored holds, at the position of each node the entry wrote, the
	// node as the state stores it (read only), so that the proposer
	// answers from it without reading the state again; nil where refused.
	Stored []*droverv1.Node
}

// UpsertNodes applies a NodeRegisterEntry: each node is created in status
// initializing, or a known node's description is updated while its status,
// eligibility, drain, events and raft indexes are kept. Registration never
// changes a known node's status. Each node is applied or refused on its own;
// the refusals are in the result.
func (s *StateStore) UpsertNodes(index uint64, e *droverv1.NodeRegisterEntry) (*RegisterResult, []Change, error) {
	res := &RegisterResult{Errors: make([]error, len(e.GetNodes())), Stored: make([]*droverv1.Node, len(e.GetNodes()))}
	changes, err := s.write(index, func(tx *txn) error {
		for i, n := range e.GetNodes() {
			// Each check precedes the node's single insert, so a refused
			// node leaves nothing behind in the shared transaction.
			if res.Errors[i] = tx.upsertNode(n, e.GetRegisteredAt()); res.Errors[i] == nil {
				res.Stored[i] = n
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return res, changes, nil
}

func (tx *txn) upsertNode(n *droverv1.Node, registeredAt int64) error {
	if n == nil {
		return invalidEntry("node registration without a node")
	}
	old := tx.node(n.GetId())
	if old == nil {
		n.Status = droverv1.NodeStatus_NODE_STATUS_INITIALIZING
		n.StatusDescription = "registered"
		n.StatusUpdatedAt = registeredAt
		if n.SchedulingEligibility == droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_UNSPECIFIED {
			n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE
		}
		n.Events = []*droverv1.NodeEvent{{
			Message: "Node registered", Subsystem: "Cluster", Time: registeredAt, CreateIndex: tx.index,
		}}
		n.LastMissedHeartbeatIndex = 0
		n.LastAllocUpdateIndex = 0
		n.CreateIndex = tx.index
		n.ModifyIndex = tx.index
		return tx.insert(TableNodes, n)
	}
	if old.GetSecretId() != n.GetSecretId() {
		return fmt.Errorf("register node %s: %w", n.GetId(), ErrSecretMismatch)
	}
	n.Status = old.Status
	n.StatusDescription = old.StatusDescription
	n.StatusUpdatedAt = old.StatusUpdatedAt
	n.SchedulingEligibility = old.SchedulingEligibility
	n.DrainStrategy = old.DrainStrategy
	n.Events = old.Events
	n.LastMissedHeartbeatIndex = old.LastMissedHeartbeatIndex
	n.LastAllocUpdateIndex = old.LastAllocUpdateIndex
	n.CreateIndex = old.CreateIndex
	n.ModifyIndex = tx.index
	return tx.insert(TableNodes, n)
}

// UpdateNodeStatus applies a NodeStatusEntry: the node's new status and the
// evaluations it calls for. It fails with ErrConflict if the node changed
// after the proposer read it (expected_modify_index), so that a decision
// made on an old view, such as promoting a node to ready, is never applied
// over a newer status.
func (s *StateStore) UpdateNodeStatus(index uint64, e *droverv1.NodeStatusEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error { return tx.updateNodeStatus(e) })
}

// NodeStatusResult says which updates of a NodeStatusBatchEntry were
// refused.
type NodeStatusResult struct {
	// Errors holds, at the position of each update in the entry, nil or why
	// it was refused (ErrConflict, ErrNotFound, ErrInvalidEntry).
	Errors []error
}

// UpdateNodeStatuses applies a NodeStatusBatchEntry: each update as
// UpdateNodeStatus would, applied or refused on its own; the refusals are
// in the result.
func (s *StateStore) UpdateNodeStatuses(index uint64, e *droverv1.NodeStatusBatchEntry) (*NodeStatusResult, []Change, error) {
	res := &NodeStatusResult{Errors: make([]error, len(e.GetUpdates()))}
	changes, err := s.write(index, func(tx *txn) error {
		for i, u := range e.GetUpdates() {
			old, err := tx.checkNodeStatus(u)
			if err != nil {
				// Refused before anything of it was written.
				res.Errors[i] = err
				continue
			}
			if err := tx.applyNodeStatus(old, u); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return res, changes, nil
}

func (tx *txn) updateNodeStatus(e *droverv1.NodeStatusEntry) error {
	old, err := tx.checkNodeStatus(e)
	if err != nil {
		return err
	}
	return tx.applyNodeStatus(old, e)
}

// checkNodeStatus returns the node a status update applies to, or why it
// may not be applied: the node is gone, or changed since the proposer read
// it.
func (tx *txn) checkNodeStatus(e *droverv1.NodeStatusEntry) (*droverv1.Node, error) {
	if _, known := droverv1.NodeStatus_name[int32(e.GetStatus())]; !known || e.GetStatus() == droverv1.NodeStatus_NODE_STATUS_UNSPECIFIED {
		return nil, invalidEntry("node %s: status %d", e.GetNodeId(), e.GetStatus())
	}
	old := tx.node(e.GetNodeId())
	if old == nil {
		return nil, fmt.Errorf("update status of node %s: %w", e.GetNodeId(), ErrNotFound)
	}
	if want := e.GetExpectedModifyIndex(); want != 0 && old.GetModifyIndex() != want {
		return nil, fmt.Errorf("update status of node %s: modify index is %d, expected %d: %w",
			e.GetNodeId(), old.GetModifyIndex(), want, ErrConflict)
	}
	return old, nil
}

// nodeRevision returns a copy of a stored node to change and store again,
// for a change that leaves what the node offers alone (its status,
// eligibility, drain or last report). The copy shares the stored node's
// resources and reservation objects, which tells the schedulers' usage
// caches that what they counted against the old version holds for the
// new one (fit.SameOffer). Those objects are never changed through it.
func nodeRevision(old *droverv1.Node) *droverv1.Node {
	n := old.CloneVT()
	n.Resources, n.Reserved = old.Resources, old.Reserved
	return n
}

// applyNodeStatus writes a checked status update of node old.
func (tx *txn) applyNodeStatus(old *droverv1.Node, e *droverv1.NodeStatusEntry) error {
	n := nodeRevision(old)
	n.Status = e.GetStatus()
	n.StatusDescription = e.GetStatusDescription()
	n.StatusUpdatedAt = e.GetUpdatedAt()
	switch {
	case !old.GetStatus().IsUnresponsive() && n.Status.IsUnresponsive():
		n.LastMissedHeartbeatIndex = tx.index
	case n.Status == droverv1.NodeStatus_NODE_STATUS_READY:
		n.LastMissedHeartbeatIndex = 0
	}
	tx.recordNodeEvent(n, e.GetEvent())
	if err := tx.insert(TableNodes, n); err != nil {
		return err
	}
	if n.Status == droverv1.NodeStatus_NODE_STATUS_DISCONNECTED && old.GetStatus() != n.Status {
		if err := tx.markAllocsUnknown(n.GetId(), e.GetUpdatedAt()); err != nil {
			return err
		}
	}
	return tx.upsertNodeEvals(n, e.GetEvals())
}

// markAllocsUnknown records, in the same write that disconnects a node,
// that its allocations which may outlive the disconnect are unknown. The
// AllocState entry is what later marks them as needing reconnect handling,
// whatever order the agent's calls arrive in when it returns. Allocations
// that cannot outlive it are left to the scheduler, which finds them lost.
func (tx *txn) markAllocsUnknown(nodeID string, now int64) error {
	for _, a := range tx.nodeSets.peek(tx, nodeID) {
		if !a.Disconnectable(tx.jobVersion(a.GetJobId(), a.GetJobVersion())) {
			continue
		}
		c := a.CloneVT()
		c.MarkUnknown(now)
		c.ModifyIndex = tx.index
		c.AllocModifyIndex = tx.index
		c.ModifyTime = now
		if err := tx.putAlloc(a, c, true); err != nil {
			return err
		}
	}
	return nil
}

// appendNodeEvent adds ev, dropping the oldest events beyond the bound.
func appendNodeEvent(events []*droverv1.NodeEvent, ev *droverv1.NodeEvent) []*droverv1.NodeEvent {
	events = append(events, ev)
	if over := len(events) - maxNodeEvents; over > 0 {
		events = append([]*droverv1.NodeEvent(nil), events[over:]...)
	}
	return events
}
