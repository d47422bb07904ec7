package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/heartbeat"
)

// expireRetries bounds how often a missed heartbeat is decided again after
// the node changed between the decision and its write.
const expireRetries = 5

// heartbeats is the leader's duty of watching nodes' heartbeats: the timers
// (server/heartbeat) and what a missed heartbeat means for a node.
type heartbeats struct {
	s      *Server
	timers *heartbeat.Timers
	// resets counts heartbeats that reset a timer, for metrics.
	resets atomic.Uint64
}

func newHeartbeats(s *Server) *heartbeats {
	h := &heartbeats{s: s}
	h.timers = heartbeat.NewTimers(s.cfg.Heartbeat, h.expire, s.logger.With("component", "heartbeat"))
	return h
}

// duty starts a timer of the failover TTL for every node that is not down,
// so that nodes which heartbeated the old leader have time to find this
// one: an election never marks the fleet down.
func (h *heartbeats) duty() LeaderDuty {
	return LeaderDuty{
		Name: "heartbeat timers",
		Start: func(ctx context.Context) error {
			var ids []string
			for n := range h.s.state.Snapshot().Nodes() {
				if n.GetStatus() != droverv1.NodeStatus_NODE_STATUS_DOWN {
					ids = append(ids, n.GetId())
				}
			}
			return h.timers.Start(ctx, ids)
		},
		Stop: h.timers.Stop,
	}
}

// Reset is a node's heartbeat reaching the leader.
func (h *heartbeats) Reset(nodeID string) (time.Duration, error) {
	ttl, err := h.timers.Reset(nodeID)
	if err == nil {
		h.resets.Add(1)
	}
	if errors.Is(err, heartbeat.ErrNotLeader) {
		return 0, fmt.Errorf("heartbeat of node %s: this server does not lead: %w", nodeID, rpc.ErrUnavailable)
	}
	return ttl, err
}

// expire decides and writes what a missed heartbeat means: a node running
// allocations that may outlive a disconnect becomes disconnected (they turn
// unknown in the same write), any other node becomes down. Evaluations for
// the affected jobs are written with the status. A disconnected node stays
// tracked, and becomes down at a later expiry once every one of its
// disconnect windows has passed.
func (h *heartbeats) expire(ctx context.Context, nodeID string) (keepTracking bool) {
	for range expireRetries {
		keep, err := h.expireOnce(ctx, nodeID)
		if !errors.Is(err, state.ErrConflict) {
			if err != nil && ctx.Err() == nil {
				h.s.logger.Warn("could not mark a node that missed its heartbeat; it is retried at its next expiry",
					"node", nodeID, "err", err)
				return true
			}
			return keep
		}
	}
	return true
}

func (h *heartbeats) expireOnce(ctx context.Context, nodeID string) (bool, error) {
	snap := h.s.state.Snapshot()
	node := snap.NodeByID(nodeID)
	if node == nil || node.GetStatus() == droverv1.NodeStatus_NODE_STATUS_DOWN {
		return false, nil
	}
	now := time.Now().UnixNano()
	next := droverv1.NodeStatus_NODE_STATUS_DOWN
	if node.GetStatus() != droverv1.NodeStatus_NODE_STATUS_INITIALIZING && outlivesDisconnect(snap, nodeID, now) {
		next = droverv1.NodeStatus_NODE_STATUS_DISCONNECTED
	}
	if next == node.GetStatus() {
		return true, nil
	}
	description := "missed heartbeats"
	if node.GetStatus() == droverv1.NodeStatus_NODE_STATUS_DISCONNECTED {
		description = "missed heartbeats past every allocation's max_client_disconnect"
	}
	entry := &droverv1.NodeStatusEntry{
		NodeId:              nodeID,
		Status:              next,
		StatusDescription:   description,
		ExpectedModifyIndex: node.GetModifyIndex(),
		UpdatedAt:           now,
		Evals:               rpc.NodeEvals(snap, node, now),
		Event: &droverv1.NodeEvent{
			Message:   fmt.Sprintf("Node heartbeat missed; status %s -> %s", node.GetStatus(), next),
			Subsystem: "Heartbeat",
			Time:      now,
		},
	}
	index, _, err := h.s.Apply(ctx, droverv1.MessageTypeNodeStatus, entry)
	if err != nil {
		return true, err
	}
	h.s.logger.Info("node missed its heartbeats", "node", nodeID, "status", next, "index", index, "evals", len(entry.Evals))
	return next == droverv1.NodeStatus_NODE_STATUS_DISCONNECTED, nil
}

// outlivesDisconnect reports whether any allocation on the node may
// outlive a disconnect: it runs (or is unknown within its window) and its
// group sets max_client_disconnect.
func outlivesDisconnect(snap *state.Snapshot, nodeID string, now int64) bool {
	allocs, _ := snap.AllocsByNode(nodeID)
	for _, a := range allocs {
		if a.Terminal() {
			continue
		}
		job := snap.JobVersion(a.GetJobId(), a.GetJobVersion())
		switch a.GetClientStatus() {
		case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING:
			if a.Disconnectable(job) {
				return true
			}
		case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN:
			window := int64(job.LookupTaskGroup(a.GetTaskGroup()).GetMaxClientDisconnect().AsDuration())
			if window > 0 && a.DisconnectDeadline(window, now) > now {
				return true
			}
		}
	}
	return false
}
