package server

import "github.com/hashicorp/raft"

// RaftForTest exposes the raft node, for tests that write to the log as an
// older server would have, past the checks of Apply.
func (s *Server) RaftForTest() *raft.Raft { return s.raft.Raft() }
