package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// The server is the rpc layer's backend.
var _ rpc.Backend = (*Server)(nil)

// Apply writes an entry through raft and returns once this server's FSM has
// applied it. It waits at most ApplyTimeout (or until ctx's deadline, if
// sooner) for the entry to enter the log; once in, the wait ends when it is
// applied, or raft fails it when leadership is lost.
func (s *Server) Apply(ctx context.Context, msgType droverv1.MessageType, entry rpc.Entry) (uint64, any, error) {
	data, err := fsm.Encode(msgType, entry)
	if err != nil {
		return 0, nil, err
	}
	timeout := s.cfg.ApplyTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if timeout <= 0 {
		return 0, nil, fmt.Errorf("apply %s: %w", msgType, context.DeadlineExceeded)
	}
	// Refused here rather than by the log store, which would make raft step
	// down (storage.go hands leadership over instead).
	if err := s.storageError(); err != nil {
		return 0, nil, fmt.Errorf("apply %s: %w", msgType, err)
	}
	start := time.Now()
	future := s.raft.Raft().Apply(data, timeout)
	if err := future.Error(); err != nil {
		return 0, nil, s.applyError(msgType, err)
	}
	s.instr.observeApply(msgType, len(data), time.Since(start))
	resp := future.Response()
	if err, ok := resp.(error); ok {
		return future.Index(), nil, err
	}
	return future.Index(), resp, nil
}

// applyError marks raft's failures that a caller may retry. An error that
// is none of raft's own comes from the log store; raft's cache flattens it
// to text, so a full data dir is recognised by asking the store.
func (s *Server) applyError(msgType droverv1.MessageType, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("apply %s: %w: %v", msgType, rpc.ErrUnavailable, err)
	}
	if full := s.storageError(); full != nil {
		return fmt.Errorf("apply %s: %w", msgType, full)
	}
	return fmt.Errorf("apply %s: %w", msgType, err)
}

// State returns the server's state store.
func (s *Server) State() *state.StateStore { return s.state }

// Events returns the server's event broker.
func (s *Server) Events() *events.Broker { return s.events }

// KnownLeader reports whether this server knows the cluster's leader.
func (s *Server) KnownLeader() bool {
	addr, _ := s.raft.Raft().LeaderWithID()
	return addr != ""
}

// HeartbeatTTL is the heartbeat interval to hand a node now, scaled to the
// size of the fleet.
func (s *Server) HeartbeatTTL() time.Duration {
	return s.cfg.Heartbeat.TTL(s.state.NodeCount())
}

// ResetHeartbeat restarts a node's heartbeat timer on the leader.
func (s *Server) ResetHeartbeat(nodeID string) (time.Duration, error) {
	return s.heartbeats.Reset(nodeID)
}

// ShutdownCh is closed when the server begins to shut down.
func (s *Server) ShutdownCh() <-chan struct{} { return s.shutdownCh }
