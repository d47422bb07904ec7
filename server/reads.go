package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/readindex"
)

// Stall detection for consistent reads: a tick every 10ms that comes over
// 100ms late marks a stall. For a while after one, confirmations go through
// the log (readindex.Confirmer.round): long enough for answers to heartbeats
// sent before the stall to have arrived, which is bounded by raft's
// heartbeat timeout.
const (
	stallTick      = 10 * time.Millisecond
	stallThreshold = 100 * time.Millisecond
)

// newReadIndex wires the consistent-read confirmer to raft and the state.
func (s *Server) newReadIndex() (*readindex.Confirmer, *readindex.StallDetector) {
	window := time.Second * time.Duration(max(s.cfg.RaftMultiplier, 1))
	stalls := readindex.NewStallDetector(stallTick, stallThreshold, window)
	reads := readindex.New(readindex.Config{
		Raft:           s.raft.Raft(),
		Log:            s.raft.LogType,
		State:          appliedState{s},
		Stalls:         stalls,
		BarrierTimeout: s.cfg.ApplyTimeout,
	})
	return reads, stalls
}

// appliedState adapts the state store to readindex.State.
type appliedState struct{ s *Server }

func (a appliedState) LatestIndex() uint64 { return a.s.state.LatestIndex() }

func (a appliedState) WaitIndex(ctx context.Context, index uint64) error {
	_, err := a.s.state.SnapshotMinIndex(ctx, index)
	return err
}

// ConfirmLeadership returns once a consistent read may be answered from this
// server's state (see rpc.Cluster). A server that no longer leads, or leads
// in a term it has not established yet, fails with rpc.ErrUnavailable so
// that the caller finds the leader.
func (s *Server) ConfirmLeadership(ctx context.Context) error {
	if !s.leading() {
		return fmt.Errorf("server %s: not the ready leader: %w", s.id, rpc.ErrUnavailable)
	}
	if err := s.reads.Confirm(ctx); err != nil {
		if errors.Is(err, readindex.ErrNotLeader) {
			return fmt.Errorf("server %s: %w: %w", s.id, rpc.ErrUnavailable, err)
		}
		return err
	}
	// The confirmation proves leadership in the term it ran in; the state
	// holds everything committed before this leader took over only if that
	// term is the one it established.
	if !s.leading() {
		return fmt.Errorf("server %s: leadership changed during the read: %w", s.id, rpc.ErrUnavailable)
	}
	return nil
}

// ReadIndex confirms leadership as ConfirmLeadership does and returns the
// state's applied index, which covers every entry committed before the
// call (see rpc.Cluster). The applied index rather than the confirmed
// commit index: the state moves only on log commands, so a commit index
// that names a raft no-op or barrier is one a follower's state never
// reports reaching.
func (s *Server) ReadIndex(ctx context.Context) (uint64, error) {
	if err := s.ConfirmLeadership(ctx); err != nil {
		return 0, err
	}
	return s.state.LatestIndex(), nil
}

// LastContact is how stale this server's state may be: zero on the ready
// leader, otherwise the time since it last heard from a leader, or -1 if it
// never has.
func (s *Server) LastContact() time.Duration {
	if s.leading() {
		return 0
	}
	last := s.raft.Raft().LastContact()
	if last.IsZero() {
		return -1
	}
	return time.Since(last)
}
