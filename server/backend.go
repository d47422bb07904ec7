package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// The server is the rpc layer's backend.
var _ rpc.Backend = (*Server)(nil)

// EntryTypeKnown reports whether the version gate lets this server write
// entries of type t.
func (s *Server) EntryTypeKnown(t droverv1.MessageType) bool {
	return s.gate.check(t) == nil
}

// Apply writes an entry through raft and returns once this server's FSM has
// applied it. It waits at most ApplyTimeout (or until ctx's deadline, if
// sooner) for the entry to enter the log; once in, the wait ends when it is
// applied, when raft fails it because leadership is lost, or when this
// server's data dir is found full (waitCommitted).
//
// It refuses with FAILED_PRECONDITION an entry type that some server of
// the raft configuration does not know (see versionGate), and every entry
// once this server has halted.
func (s *Server) Apply(ctx context.Context, msgType droverv1.MessageType, entry rpc.Entry) (uint64, any, error) {
	if err := s.HaltReason(); err != nil {
		return 0, nil, haltError(msgType, err)
	}
	if err := s.gate.check(msgType); err != nil {
		return 0, nil, err
	}
	data, err := fsm.Encode(msgType, entry)
	if err != nil {
		return 0, nil, err
	}
	if err := s.checkPortable(msgType, entry, data[1:]); err != nil {
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
	if err := s.waitCommitted(future); err != nil {
		if errors.Is(err, errStoppedWaiting) {
			return 0, nil, fmt.Errorf("apply %s: %w", msgType, err)
		}
		return 0, nil, s.applyError(msgType, err)
	}
	s.instr.observeApply(msgType, len(data), time.Since(start))
	resp := future.Response()
	if err, ok := resp.(error); ok {
		return future.Index(), nil, haltError(msgType, err)
	}
	return future.Index(), resp, nil
}

// waitCommitted waits for raft's answer to an entry, but not past the
// moment this server's data dir is found full: a leader that cannot store
// entries stays leader while its followers answer heartbeats, so an entry
// it holds may wait until space is freed. The write committers send one
// entry at a time, so every later caller would wait behind it; giving up
// lets the next entry be refused at once (see Apply). The error is
// UNAVAILABLE but does not say the write was not stored: the entry may
// already be in the log and be applied once space is freed.
//
// It also gives up once the server shuts down: raft never answers an entry
// still queued when it stops (hashicorp/raft issue 498), and a leader duty
// waiting on one would hold up the shutdown for ever (the deployer did, in
// a clean-clone CI run).
func (s *Server) waitCommitted(future raft.Future) error {
	return awaitCommit(answerOf(future), s.shutdownCh, s.raft.StorageFull, s.raft.StorageError, s.id)
}

// waitAnswered waits for raft's answer to future until the server shuts
// down, however long that takes otherwise: for a new leader's barrier,
// which must wait out a full data dir rather than give up leading.
func (s *Server) waitAnswered(future raft.Future) error {
	return awaitCommit(answerOf(future), s.shutdownCh, nil, nil, s.id)
}

// answerOf delivers future's answer on a channel, so that a wait for it
// can end on other events. The goroutine ends when raft answers, which it
// may never do once it has shut down.
func answerOf(future raft.Future) <-chan error {
	answered := make(chan error, 1)
	go func() { answered <- future.Error() }()
	return answered
}

// awaitCommit is waitCommitted's wait: for raft's answer, until shutdown
// closes, or until full signals and fullErr still names a full data dir.
// A nil full waits through a full data dir.
func awaitCommit(answered <-chan error, shutdown <-chan struct{}, full func() <-chan struct{}, fullErr func() error, id string) error {
	for {
		var fullCh <-chan struct{}
		if full != nil {
			fullCh = full()
		}
		select {
		case err := <-answered:
			return err
		case <-shutdown:
			return fmt.Errorf("%w: %w: server %s is shutting down; the write may still be applied", rpc.ErrUnavailable, errStoppedWaiting, id)
		case <-fullCh:
			// Space may have been freed since; then wait on.
			if err := fullErr(); err != nil {
				return fmt.Errorf("%w: %w: server %s: %w; it may still be applied once space is freed",
					rpc.ErrUnavailable, errStoppedWaiting, id, err)
			}
		}
	}
}

// errStoppedWaiting marks a write whose outcome is unknown: it was handed
// to raft but the wait for it ended (waitCommitted).
var errStoppedWaiting = errors.New("stopped waiting for the write to commit")

// portableGate scans the entries Apply proposes. Its zero value is ready.
type portableGate struct {
	scanners droverv1.WireScanners
}

// checkPortable refuses an entry that the standard protobuf runtime could
// not read back: a string that is not valid UTF-8, or unknown fields that
// are not well-formed. The rpc layer refuses requests holding them, but
// entries the server builds itself pass only here, the last gate before
// the log. It scans the encoded entry, which costs a fraction of a walk
// over the message (BenchmarkPortableCheck); the walk runs only to name the
// field of a refused entry.
func (s *Server) checkPortable(msgType droverv1.MessageType, entry rpc.Entry, encoded []byte) error {
	msg, ok := entry.(proto.Message)
	if !ok {
		return fmt.Errorf("apply %s: %T is not a protobuf message", msgType, entry)
	}
	if s.portable.scanners.Portable(msg.ProtoReflect().Descriptor(), encoded) {
		return nil
	}
	if err := droverv1.CheckPortable(msg); err != nil {
		return fmt.Errorf("apply %s: %w", msgType, err)
	}
	return fmt.Errorf("apply %s: the encoded entry is not well-formed protobuf", msgType)
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
