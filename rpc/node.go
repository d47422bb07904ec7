package rpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// nodeService implements droverv1.NodeService: the API agents call.
type nodeService struct {
	*services
	droverv1.UnimplementedNodeServiceServer
}

// statusRetries bounds how often UpdateStatus re-decides after the node
// changed between its read and its write.
const statusRetries = 5

// authenticate returns the node if it exists and secret is its secret.
func authenticate(snap *state.Snapshot, nodeID, secret string) (*droverv1.Node, error) {
	node := snap.NodeByID(nodeID)
	if node == nil {
		return nil, fmt.Errorf("node %s: %w", nodeID, state.ErrNotFound)
	}
	if node.GetSecretId() != secret {
		return nil, fmt.Errorf("node %s: secret does not match: %w", nodeID, errPermissionDenied)
	}
	return node, nil
}

// Register creates a node in status initializing, or updates the
// description of a known node without touching its status. An unchanged
// description writes nothing. Registrations arriving together share one
// raft entry (group commit).
func (s *nodeService) Register(ctx context.Context, req *droverv1.RegisterNodeRequest) (*droverv1.RegisterNodeResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	node := req.GetNode()
	node.ClearServerFields()
	snap := s.backend.State().Snapshot()
	existing := snap.NodeByID(node.GetId())
	if existing != nil {
		if existing.GetSecretId() != node.GetSecretId() {
			return nil, fmt.Errorf("node %s is registered with another secret: %w", node.GetId(), errPermissionDenied)
		}
		if existing.DescriptionEqual(node) {
			return s.registerResponse(existing, existing.GetModifyIndex())
		}
	}
	g, pos, err := s.registrations.Submit(ctx, node, 1)
	if err != nil {
		return nil, err
	}
	res, ok := g.Response.(*state.RegisterResult)
	if !ok {
		return nil, fmt.Errorf("node registrations at index %d: unexpected apply response %T", g.Index, g.Response)
	}
	if err := res.Errors[pos]; err != nil {
		return nil, fmt.Errorf("register node %s: %w", node.GetId(), err)
	}
	return s.registerResponse(res.Stored[pos], g.Index)
}

// registerResponse arms the heartbeat timer of a node that is not down (a
// down node gets one when it heartbeats) and tells the agent its TTL.
func (s *nodeService) registerResponse(node *droverv1.Node, index uint64) (*droverv1.RegisterNodeResponse, error) {
	ttl := s.backend.HeartbeatTTL()
	if node.GetStatus() != droverv1.NodeStatus_NODE_STATUS_DOWN {
		var err error
		if ttl, err = s.backend.ResetHeartbeat(node.GetId()); err != nil {
			return nil, err
		}
	}
	resp := &droverv1.RegisterNodeResponse{
		Index:                 index,
		Status:                node.GetStatus(),
		SchedulingEligibility: node.GetSchedulingEligibility(),
		Servers:               s.backend.Servers(),
	}
	resp.SetHeartbeatTTL(ttl)
	return resp, nil
}

// UpdateStatus is the heartbeat. It writes only when the node's status
// changes, and then together with the evaluations the change calls for.
// The decision is made on a snapshot and written with the node's modify
// index as a precondition; if the node changed in between (say, the leader
// marked it down), the decision is made again on the new state.
func (s *nodeService) UpdateStatus(ctx context.Context, req *droverv1.UpdateNodeStatusRequest) (*droverv1.UpdateNodeStatusResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	for range statusRetries {
		resp, err := s.updateStatusOnce(ctx, req)
		if !errors.Is(err, state.ErrConflict) {
			return resp, err
		}
	}
	return nil, fmt.Errorf("node %s kept changing during %d status updates: %w", req.GetNodeId(), statusRetries, ErrUnavailable)
}

func (s *nodeService) updateStatusOnce(ctx context.Context, req *droverv1.UpdateNodeStatusRequest) (*droverv1.UpdateNodeStatusResponse, error) {
	snap := s.backend.State().Snapshot()
	node, err := authenticate(snap, req.GetNodeId(), req.GetSecretId())
	if err != nil {
		return nil, err
	}
	// The timer restarts before anything is written, so that it cannot
	// expire between this heartbeat's decision and its write.
	ttl, err := s.backend.ResetHeartbeat(node.GetId())
	if err != nil {
		return nil, err
	}
	resp := &droverv1.UpdateNodeStatusResponse{
		Servers: s.backend.Servers(),
	}
	resp.SetHeartbeatTTL(ttl)
	next := nextStatus(node, snap)
	resp.Status = next
	if next == node.GetStatus() {
		return resp, nil
	}
	now := time.Now().UnixNano()
	var evals []*droverv1.Evaluation
	if statusChangeNeedsEvals(node.GetStatus(), next) {
		evals = NodeEvals(snap, node, now)
	}
	entry := &droverv1.NodeStatusEntry{
		NodeId:              node.GetId(),
		Status:              next,
		StatusDescription:   statusDescription(node.GetStatus(), next),
		ExpectedModifyIndex: node.GetModifyIndex(),
		UpdatedAt:           now,
		Evals:               evals,
		Event: &droverv1.NodeEvent{
			Message:   fmt.Sprintf("Node status %s -> %s", node.GetStatus(), next),
			Subsystem: "Heartbeat",
			Time:      now,
		},
	}
	// Heartbeats arriving together share one entry (a fleet coming up
	// would otherwise write one per node).
	g, pos, err := s.statuses.Submit(ctx, entry, 1)
	if err != nil {
		return nil, err
	}
	res, ok := g.Response.(*state.NodeStatusResult)
	if !ok {
		return nil, fmt.Errorf("node status changes at index %d: unexpected apply response %T", g.Index, g.Response)
	}
	if err := res.Errors[pos]; err != nil {
		return nil, err
	}
	resp.Index = g.Index
	resp.EvalIds = evalIDs(evals)
	return resp, nil
}

// nextStatus is the status a heartbeat (reporting ready) moves a node to.
// A node back from down or disconnected starts over in initializing. An
// initializing node becomes ready only when it holds no allocation that is
// not terminal, or it has reported its allocations since it last missed a
// heartbeat: until then the servers' view of what runs there may be stale,
// and nothing may be scheduled on it.
func nextStatus(node *droverv1.Node, snap *state.Snapshot) droverv1.NodeStatus {
	switch node.GetStatus() {
	case droverv1.NodeStatus_NODE_STATUS_DOWN, droverv1.NodeStatus_NODE_STATUS_DISCONNECTED:
		return droverv1.NodeStatus_NODE_STATUS_INITIALIZING
	case droverv1.NodeStatus_NODE_STATUS_INITIALIZING:
		if node.GetLastAllocUpdateIndex() > node.GetLastMissedHeartbeatIndex() || !hasLiveAllocs(snap, node.GetId()) {
			return droverv1.NodeStatus_NODE_STATUS_READY
		}
		return droverv1.NodeStatus_NODE_STATUS_INITIALIZING
	}
	return droverv1.NodeStatus_NODE_STATUS_READY
}

func hasLiveAllocs(snap *state.Snapshot, nodeID string) bool {
	allocs, _ := snap.AllocsByNode(nodeID)
	for _, a := range allocs {
		if !a.Terminal() {
			return true
		}
	}
	return false
}

// statusChangeNeedsEvals reports whether moving a node from one status to
// another changes where work may run: becoming ready, and entering or
// leaving disconnected or down.
func statusChangeNeedsEvals(from, to droverv1.NodeStatus) bool {
	switch {
	case to == droverv1.NodeStatus_NODE_STATUS_READY:
		return true
	case from == droverv1.NodeStatus_NODE_STATUS_DISCONNECTED || to == droverv1.NodeStatus_NODE_STATUS_DISCONNECTED:
		return true
	case to == droverv1.NodeStatus_NODE_STATUS_DOWN:
		return true
	}
	return false
}

func statusDescription(from, to droverv1.NodeStatus) string {
	switch {
	case to == droverv1.NodeStatus_NODE_STATUS_READY:
		return "heartbeating"
	case from.IsUnresponsive():
		return "heartbeating again; waiting for the agent's allocation report"
	}
	return "waiting for the agent's allocation report"
}

// NodeEvals makes one pending evaluation per job that may be affected by a
// change of the node: jobs with allocations on it that still matter, and
// system jobs that may run on it.
func NodeEvals(snap *state.Snapshot, node *droverv1.Node, now int64) []*droverv1.Evaluation {
	seen := make(map[string]struct{})
	var evals []*droverv1.Evaluation
	add := func(job *droverv1.Job) {
		if job == nil {
			return
		}
		if _, dup := seen[job.GetId()]; dup {
			return
		}
		seen[job.GetId()] = struct{}{}
		evals = append(evals, NewEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE, node.GetId(), now))
	}
	allocs, _ := snap.AllocsByNode(node.GetId())
	for _, a := range allocs {
		job := snap.JobByID(a.GetJobId())
		if allocMattersToNodeChange(a, job) {
			add(job)
		}
	}
	for job := range snap.JobsByType(droverv1.JobType_JOB_TYPE_SYSTEM) {
		if !job.GetStop() && slices.Contains(job.GetDatacenters(), node.GetDatacenter()) {
			add(job)
		}
	}
	return evals
}

// allocMattersToNodeChange reports whether an allocation's job must be
// re-evaluated when its node changes status. Batch work that has finished
// does not; service work matters until the servers and the agent both
// consider it stopped.
func allocMattersToNodeChange(a *droverv1.Allocation, job *droverv1.Job) bool {
	if job == nil {
		return false
	}
	if job.GetType() == droverv1.JobType_JOB_TYPE_BATCH {
		return !a.ClientTerminal()
	}
	return !(a.ServerTerminal() && a.ClientTerminal())
}

// NewEval builds a pending evaluation of job, about nodeID if it is set.
func NewEval(job *droverv1.Job, trigger droverv1.EvalTrigger, nodeID string, now int64) *droverv1.Evaluation {
	return &droverv1.Evaluation{
		Id:          uuid.NewString(),
		Priority:    job.GetPriority(),
		Type:        job.GetType(),
		TriggeredBy: trigger,
		JobId:       job.GetId(),
		NodeId:      nodeID,
		Status:      droverv1.EvalStatus_EVAL_STATUS_PENDING,
		CreateTime:  now,
		ModifyTime:  now,
	}
}
