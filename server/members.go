package server

import (
	"slices"

	"github.com/droverhq/drover/server/autopilot"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// newAutopilot builds the leader's autopilot: it tracks the health of every
// server through ClusterService.Info, promotes joining servers once they
// are stable, and removes servers that stayed unreachable.
func (s *Server) newAutopilot() *autopilot.Autopilot {
	ap := s.cfg.Autopilot
	return autopilot.New(autopilot.Config{
		Raft:                    s.raft.Raft(),
		LocalID:                 s.id,
		LocalVersion:            s.cfg.release(),
		Logger:                  s.logger,
		Members:                 s.recordedServers,
		FetchInfo:               s.peers.info,
		RemoveRecord:            s.forgetServer,
		CleanupDeadServers:      ap.CleanupDeadServers,
		DeadServerAfter:         ap.DeadServerAfter,
		LastContactThreshold:    ap.LastContactThreshold,
		MaxTrailingLogs:         ap.MaxTrailingLogs,
		ServerStabilizationTime: ap.ServerStabilizationTime,
		UpdateInterval:          ap.UpdateInterval,
		ReconcileInterval:       ap.ReconcileInterval,
	})
}

// recordedServers lists the servers the replicated state records.
func (s *Server) recordedServers() []*droverv1.ServerMember {
	return slices.Collect(s.state.Snapshot().Servers())
}

// Servers lists the gRPC addresses of every recorded server, so that
// agents can fail over; until the cluster has recorded any, just this one.
func (s *Server) Servers() []string {
	var addrs []string
	for m := range s.state.Snapshot().Servers() {
		addrs = append(addrs, m.GetRpcAddr())
	}
	if len(addrs) == 0 {
		return []string{s.rpcAddr}
	}
	return addrs
}
