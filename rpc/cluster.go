package rpc

import (
	"context"
	"fmt"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Leader is the cluster's leader as one server knows it.
type Leader struct {
	// ID is the leader's raft id; empty while no leader is known.
	ID string
	// RPCAddr is the leader's gRPC address; empty while unknown, even when
	// the id is known (the leader has not yet recorded its address).
	RPCAddr string
	// Local is set when this server is the leader.
	Local bool
	// Ready is set when this server is the leader and has applied every
	// entry committed before it took over, so it may answer for the cluster.
	Ready bool
}

// Cluster is what the cluster and operator services need from the server:
// membership and raft operations. The server implements it; calls that
// change the raft configuration reach it only on the leader, because the
// rpc layer forwards them there.
type Cluster interface {
	// Leader describes the leader as this server knows it now.
	Leader() Leader
	// LeaderChanged returns a channel closed at the next change of what
	// Leader returns.
	LeaderChanged() <-chan struct{}
	// ConfirmLeadership returns once a consistent read made before the
	// call may be answered from this server's state: a quorum confirmed
	// after the call began that this server leads, and its state holds
	// every entry committed when that confirmation began. It fails with an
	// error wrapping ErrUnavailable when this server does not lead.
	ConfirmLeadership(ctx context.Context) error
	// ReadIndex is ConfirmLeadership for a read another server answers: it
	// returns an index this server's state has applied that covers every
	// entry committed before the call, for a follower to wait for.
	ReadIndex(ctx context.Context) (uint64, error)
	// Info describes this server.
	Info() *droverv1.ServerInfoResponse
	// Join adds a server to the raft configuration, or records its new
	// addresses or version.
	Join(ctx context.Context, member *droverv1.ServerMember) (*droverv1.JoinResponse, error)
	// RaftPeers lists the raft configuration.
	RaftPeers(ctx context.Context) (*droverv1.RaftListPeersResponse, error)
	// RemovePeer removes a server, named by id or raft address, from the
	// raft configuration.
	RemovePeer(ctx context.Context, id, address string) (*droverv1.RaftRemovePeerResponse, error)
	// TransferLeadership hands leadership to the named voter, or to the
	// most up to date one when id is empty.
	TransferLeadership(ctx context.Context, id string) (*droverv1.RaftTransferLeadershipResponse, error)
	// Members lists every server with its health.
	Members(ctx context.Context) (*droverv1.ServerMembersResponse, error)
}

// clusterService implements droverv1.ClusterService.
type clusterService struct {
	*services
	droverv1.UnimplementedClusterServiceServer
}

// Info is answered by the server called, never forwarded.
func (s *clusterService) Info(context.Context, *droverv1.ServerInfoRequest) (*droverv1.ServerInfoResponse, error) {
	return s.cluster.Info(), nil
}

// Join runs on the leader (the forwarder sends it there).
func (s *clusterService) Join(ctx context.Context, req *droverv1.JoinRequest) (*droverv1.JoinResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return s.cluster.Join(ctx, req.GetServer())
}

// ReadIndex runs on the leader (the forwarder sends it there).
func (s *clusterService) ReadIndex(ctx context.Context, _ *droverv1.ReadIndexRequest) (*droverv1.ReadIndexResponse, error) {
	index, err := s.cluster.ReadIndex(ctx)
	if err != nil {
		return nil, err
	}
	return &droverv1.ReadIndexResponse{Index: index, LeaderId: s.cluster.Leader().ID}, nil
}

// operatorService implements droverv1.OperatorService.
type operatorService struct {
	*services
	droverv1.UnimplementedOperatorServiceServer
}

func (s *operatorService) RaftListPeers(ctx context.Context, _ *droverv1.RaftListPeersRequest) (*droverv1.RaftListPeersResponse, error) {
	return s.cluster.RaftPeers(ctx)
}

func (s *operatorService) RaftRemovePeer(ctx context.Context, req *droverv1.RaftRemovePeerRequest) (*droverv1.RaftRemovePeerResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return s.cluster.RemovePeer(ctx, req.GetId(), req.GetAddress())
}

func (s *operatorService) RaftTransferLeadership(ctx context.Context, req *droverv1.RaftTransferLeadershipRequest) (*droverv1.RaftTransferLeadershipResponse, error) {
	return s.cluster.TransferLeadership(ctx, req.GetId())
}

func (s *operatorService) ServerMembers(ctx context.Context, _ *droverv1.ServerMembersRequest) (*droverv1.ServerMembersResponse, error) {
	return s.cluster.Members(ctx)
}

// StateDigest is answered from the called server's own state: it is how
// operators and tests compare replicas.
func (s *operatorService) StateDigest(context.Context, *droverv1.StateDigestRequest) (*droverv1.StateDigestResponse, error) {
	snap := s.backend.State().Snapshot()
	tables, err := snap.Digest()
	if err != nil {
		return nil, err
	}
	return &droverv1.StateDigestResponse{Index: snap.Index(), Tables: tables}, nil
}

// JobPlanner answers JobService.Plan.
type JobPlanner interface {
	// PlanJob runs the scheduler for a canonical, valid job against this
	// server's state without writing anything.
	PlanJob(ctx context.Context, job *droverv1.Job) (*droverv1.PlanJobResponse, error)
}

// Collector runs garbage collection on the leader.
type Collector interface {
	// GarbageCollect collects everything collectable now, whatever its age.
	GarbageCollect(ctx context.Context) (*droverv1.GarbageCollectResponse, error)
}

// GarbageCollect runs on the leader (the forwarder sends it there).
func (s *operatorService) GarbageCollect(ctx context.Context, _ *droverv1.GarbageCollectRequest) (*droverv1.GarbageCollectResponse, error) {
	if s.collector == nil {
		return nil, fmt.Errorf("garbage collection is not running on this server: %w", ErrUnavailable)
	}
	return s.collector.GarbageCollect(ctx)
}
