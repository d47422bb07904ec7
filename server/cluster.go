package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/version"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/autopilot"
)

// raftChangeTimeout bounds one raft configuration change.
const raftChangeTimeout = 10 * time.Second

// The server answers the cluster and operator services.
var _ rpc.Cluster = (*Server)(nil)

// member is this server's own record.
func (s *Server) member() *droverv1.ServerMember {
	return &droverv1.ServerMember{
		Id:       s.id,
		RpcAddr:  s.rpcAddr,
		RaftAddr: string(s.raft.Addr()),
		Version:  s.cfg.release(),
	}
}

// Info describes this server.
func (s *Server) Info() *droverv1.ServerInfoResponse {
	r := s.raft.Raft()
	_, leaderID := r.LeaderWithID()
	hasState := s.raft.HasState()
	info := &droverv1.ServerInfoResponse{
		Server:          s.member(),
		HasState:        hasState,
		BootstrapExpect: uint32(s.cfg.BootstrapExpect),
		RaftState:       autopilot.RaftState(r.State()),
		LeaderId:        string(leaderID),
		LastIndex:       r.LastIndex(),
		AppliedIndex:    s.state.LatestIndex(),
		ClusterId:       s.state.Snapshot().ClusterMetadata().GetClusterId(),
	}
	if !hasState {
		info.Forming = s.forming.list()
	}
	if err := s.raft.StorageError(); err != nil {
		info.StorageError = err.Error()
	}
	info.LastTerm = autopilot.LastTerm(r.Stats())
	switch last := r.LastContact(); {
	case r.State() == raft.Leader:
		info.SetLastContact(0)
	case last.IsZero():
		// Never heard from a leader.
		info.SetLastContact(-1)
	default:
		info.SetLastContact(time.Since(last))
	}
	return info
}

// Join adds a server to the raft configuration as a non-voter, which
// autopilot promotes once it has been healthy for the stabilization time,
// and records its addresses and version. A server already in the
// configuration at the same address only has its record refreshed. It runs
// on the leader.
func (s *Server) Join(ctx context.Context, m *droverv1.ServerMember) (*droverv1.JoinResponse, error) {
	if !version.Valid(m.GetVersion()) {
		return nil, fmt.Errorf("join server %s: version %q: %w", m.GetId(), m.GetVersion(), rpc.ErrFailedPrecondition)
	}
	conf, err := s.configuration()
	if err != nil {
		return nil, err
	}
	r := s.raft.Raft()
	id, addr := raft.ServerID(m.GetId()), raft.ServerAddress(m.GetRaftAddr())
	inConfig := false
	for _, srv := range conf.Servers {
		switch {
		case srv.ID == id && srv.Address == addr:
			inConfig = true
		case srv.ID != id && srv.Address == addr:
			// Another id at the same address is a server that lost its
			// data dir and came back under a new id: the old entry can
			// never answer again.
			s.logger.Info("removing stale server at a joining server's address", "stale_id", srv.ID, "address", addr, "joining_id", id)
			if err := r.RemoveServer(srv.ID, 0, raftChangeTimeout).Error(); err != nil {
				return nil, raftChangeError("remove stale server "+string(srv.ID), err)
			}
		}
	}
	resp := &droverv1.JoinResponse{LeaderId: s.id}
	if !inConfig {
		// AddNonvoter keeps a voter's suffrage when the server is already a
		// voter at another address, and only updates the address.
		future := r.AddNonvoter(id, addr, 0, raftChangeTimeout)
		if err := future.Error(); err != nil {
			return nil, raftChangeError("add server "+m.GetId(), err)
		}
		resp.Index = future.Index()
		s.logger.Info("server joined", "id", id, "raft_addr", addr, "rpc_addr", m.GetRpcAddr(), "version", m.GetVersion())
	}
	index, err := s.recordServer(ctx, m)
	if err != nil {
		return nil, err
	}
	resp.Index = max(resp.Index, index)
	return resp, nil
}

// recordServer writes m to the servers table unless it is already there
// as it is.
func (s *Server) recordServer(ctx context.Context, m *droverv1.ServerMember) (uint64, error) {
	if stored := s.state.Snapshot().ServerByID(m.GetId()); sameMember(stored, m) {
		return 0, nil
	}
	index, _, err := s.Apply(ctx, droverv1.MessageTypeServerUpsert, &droverv1.ServerUpsertEntry{Server: m})
	if err != nil {
		return 0, fmt.Errorf("record server %s: %w", m.GetId(), err)
	}
	return index, nil
}

// sameMember compares the fields a server announces.
func sameMember(a, b *droverv1.ServerMember) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.GetId() == b.GetId() && a.GetRpcAddr() == b.GetRpcAddr() &&
		a.GetRaftAddr() == b.GetRaftAddr() && a.GetVersion() == b.GetVersion()
}

// configuration is the latest raft configuration.
func (s *Server) configuration() (raft.Configuration, error) {
	future := s.raft.Raft().GetConfiguration()
	if err := future.Error(); err != nil {
		return raft.Configuration{}, fmt.Errorf("read raft configuration: %w: %v", rpc.ErrUnavailable, err)
	}
	return future.Configuration(), nil
}

// raftChangeError marks a failed configuration change retryable when raft
// failed for lack of leadership.
func raftChangeError(what string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%s: %w: %v", what, rpc.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w: %v", what, rpc.ErrFailedPrecondition, err)
}

// RaftPeers lists the raft configuration with each server's last index as
// autopilot last measured it.
func (s *Server) RaftPeers(context.Context) (*droverv1.RaftListPeersResponse, error) {
	conf, err := s.configuration()
	if err != nil {
		return nil, err
	}
	_, leaderID := s.raft.Raft().LeaderWithID()
	lastIndexes := s.autopilot.LastIndexes()
	snap := s.state.Snapshot()
	// raft does not say at which index the configuration was written
	// (GetConfiguration's future has none), so report the index the
	// listing reflects: every change up to it is included.
	resp := &droverv1.RaftListPeersResponse{Index: s.raft.Raft().AppliedIndex()}
	for _, srv := range conf.Servers {
		id := string(srv.ID)
		peer := &droverv1.RaftPeer{
			Id:        id,
			Address:   string(srv.Address),
			Voter:     srv.Suffrage == raft.Voter,
			Leader:    srv.ID == leaderID,
			LastIndex: lastIndexes[id],
		}
		if m := snap.ServerByID(id); m != nil {
			peer.RpcAddr = m.GetRpcAddr()
		}
		if id == s.id {
			peer.LastIndex = s.raft.Raft().LastIndex()
		}
		resp.Peers = append(resp.Peers, peer)
	}
	slices.SortFunc(resp.Peers, func(a, b *droverv1.RaftPeer) int { return strings.Compare(a.Id, b.Id) })
	return resp, nil
}

// RemovePeer removes a server from the raft configuration and forgets its
// record. The leader refuses to remove itself.
func (s *Server) RemovePeer(ctx context.Context, id, address string) (*droverv1.RaftRemovePeerResponse, error) {
	conf, err := s.configuration()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(conf.Servers, func(srv raft.Server) bool {
		return (id != "" && string(srv.ID) == id) || (address != "" && string(srv.Address) == address)
	})
	if i < 0 {
		return nil, fmt.Errorf("raft peer %s%s: %w", id, address, state.ErrNotFound)
	}
	target := conf.Servers[i].ID
	if string(target) == s.id {
		return nil, fmt.Errorf("remove peer %s: it is the leader; transfer leadership first: %w", target, rpc.ErrFailedPrecondition)
	}
	future := s.raft.Raft().RemoveServer(target, 0, raftChangeTimeout)
	if err := future.Error(); err != nil {
		return nil, raftChangeError("remove peer "+string(target), err)
	}
	s.logger.Info("removed raft peer", "id", target, "address", conf.Servers[i].Address)
	index := future.Index()
	if err := s.forgetServer(ctx, string(target)); err != nil {
		return nil, err
	}
	return &droverv1.RaftRemovePeerResponse{Index: index, Id: string(target)}, nil
}

// forgetServer drops a removed server's record.
func (s *Server) forgetServer(ctx context.Context, id string) error {
	if s.state.Snapshot().ServerByID(id) == nil {
		return nil
	}
	if _, _, err := s.Apply(ctx, droverv1.MessageTypeServerRemove, &droverv1.ServerRemoveEntry{ServerId: id}); err != nil {
		return fmt.Errorf("forget server %s: %w", id, err)
	}
	return nil
}

// TransferLeadership hands leadership to the named voter, or to the most
// up to date one, and waits (bounded by ctx) until a new leader is known.
func (s *Server) TransferLeadership(ctx context.Context, id string) (*droverv1.RaftTransferLeadershipResponse, error) {
	r := s.raft.Raft()
	var future raft.Future
	if id == "" {
		future = r.LeadershipTransfer()
	} else {
		conf, err := s.configuration()
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(conf.Servers, func(srv raft.Server) bool { return string(srv.ID) == id })
		switch {
		case i < 0:
			return nil, fmt.Errorf("raft peer %s: %w", id, state.ErrNotFound)
		case conf.Servers[i].Suffrage != raft.Voter:
			return nil, fmt.Errorf("transfer leadership to %s: not a voter: %w", id, rpc.ErrFailedPrecondition)
		case id == s.id:
			return &droverv1.RaftTransferLeadershipResponse{LeaderId: s.id}, nil
		}
		future = r.LeadershipTransferToServer(conf.Servers[i].ID, conf.Servers[i].Address)
	}
	if err := future.Error(); err != nil {
		return nil, raftChangeError("transfer leadership", err)
	}
	for {
		changed := s.LeaderChanged()
		if l := s.Leader(); l.ID != "" && l.ID != s.id {
			return &droverv1.RaftTransferLeadershipResponse{LeaderId: l.ID}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the new leader: %w", ctx.Err())
		}
	}
}

// Members lists every server with its health as autopilot sees it, and
// the cluster's id.
func (s *Server) Members(context.Context) (*droverv1.ServerMembersResponse, error) {
	resp := s.autopilot.Members()
	resp.ClusterId = s.state.Snapshot().ClusterMetadata().GetClusterId()
	return resp, nil
}
