package server

import (
	"errors"
	"fmt"

	"github.com/droverhq/drover/fsm"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// A server whose FSM halted (an entry its release cannot apply, see
// fsm.Halt) keeps its state as it was before that entry. It reports
// NOT_SERVING, refuses reads and writes with FAILED_PRECONDITION carrying
// the reason, and tells whoever runs it through Halted, so that `drover
// server` can exit non-zero. raft keeps running until Shutdown: the FSM
// never blocks raft's goroutine (it answers every later entry with the
// halt), so Shutdown cannot hang on it.

// Halted returns a channel closed when this server stops applying the raft
// log; HaltReason then says why.
func (s *Server) Halted() <-chan struct{} { return s.fsm.HaltCh() }

// HaltReason says why this server stopped applying the raft log, or
// returns nil while it applies it.
func (s *Server) HaltReason() error {
	if h := s.fsm.Halted(); h != nil {
		return h
	}
	return nil
}

// watchHalt turns health NOT_SERVING once the FSM halts. The FSM has
// logged the reason at ERROR.
func (s *Server) watchHalt() {
	select {
	case <-s.fsm.HaltCh():
		s.rpc.SetServing(false)
	case <-s.shutdownCh:
	}
}

// haltError marks a failure caused by the halt as FAILED_PRECONDITION.
// Other errors are returned as they are.
func haltError(msgType droverv1.MessageType, err error) error {
	var h *fsm.Halt
	if !errors.As(err, &h) {
		return err
	}
	return fmt.Errorf("apply %s: %w: %w", msgType, rpc.ErrFailedPrecondition, h)
}
