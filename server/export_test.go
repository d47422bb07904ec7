package server

import (
	"time"

	"github.com/hashicorp/raft"
)

// ApplyRaw proposes data as one raft entry through this server's raft, as
// a server of another release would write it, and returns the entry's
// index and this server's FSM response.
func (s *Server) ApplyRaw(data []byte) (uint64, any, error) {
	f := s.raft.Raft().Apply(data, 10*time.Second)
	if err := f.Error(); err != nil {
		return 0, nil, err
	}
	return f.Index(), f.Response(), nil
}

// TakeSnapshot asks raft for a snapshot now.
func (s *Server) TakeSnapshot() error { return s.raft.Raft().Snapshot().Error() }

// RaftForTest exposes the raft node, for tests that write to the log as an
// older server would have, past the checks of Apply.
func (s *Server) RaftForTest() *raft.Raft { return s.raft.Raft() }
