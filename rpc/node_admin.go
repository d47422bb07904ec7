package rpc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// The operator side of the node service: reading nodes, and eligibility
// and drains. These calls take no node secret.

// prefixMatches bounds how many nodes an ambiguous prefix lists.
const prefixMatches = 5

// Get returns one node, named by id or unique id prefix, without its
// secret, and its allocations.
func (s *nodeService) Get(ctx context.Context, req *droverv1.GetNodeRequest) (*droverv1.GetNodeResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var (
		node   *droverv1.Node
		allocs []*droverv1.Allocation
		err    error
	)
	meta, qerr := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		node, err = nodeByPrefix(snap, req.GetNodeId())
		if err != nil {
			return atLeastOne(snap.TableIndex(state.TableNodes)), nil
		}
		var allocIndex uint64
		allocs, allocIndex = snap.AllocsByNode(node.GetId())
		return max(node.GetModifyIndex(), allocIndex), nil
	})
	if qerr != nil {
		return nil, qerr
	}
	if err != nil {
		return nil, err
	}
	return &droverv1.GetNodeResponse{Node: node.Sanitized(), Allocs: allocs, Meta: meta}, nil
}

// nodeByPrefix finds the node whose id is, or uniquely starts with, id.
func nodeByPrefix(snap *state.Snapshot, id string) (*droverv1.Node, error) {
	if n := snap.NodeByID(id); n != nil {
		return n, nil
	}
	matches, _ := snap.ListNodes(state.Page{Prefix: strings.ToLower(id), Size: prefixMatches + 1})
	switch len(matches) {
	case 0:
		return nil, fmt.Errorf("node %s: %w", id, state.ErrNotFound)
	case 1:
		return matches[0], nil
	}
	ids := make([]string, 0, len(matches))
	for _, n := range matches[:min(len(matches), prefixMatches)] {
		ids = append(ids, n.GetId())
	}
	more := ""
	if len(matches) > prefixMatches {
		more = ", ..."
	}
	return nil, fmt.Errorf("node id prefix %q matches several nodes (%s%s): %w",
		id, strings.Join(ids, ", "), more, ErrInvalidArgument)
}

// List returns one page of nodes in id order, without their secrets.
func (s *nodeService) List(ctx context.Context, req *droverv1.ListNodesRequest) (*droverv1.ListNodesResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	nodes, next, meta, err := listObjects(ctx, s.services, req.GetQuery(), state.TableNodes,
		func(snap *state.Snapshot) ([]*droverv1.Node, string) {
			return snap.ListNodes(pageOf(req.GetPage()))
		})
	if err != nil {
		return nil, err
	}
	for i, n := range nodes {
		nodes[i] = n.Sanitized()
	}
	return &droverv1.ListNodesResponse{Nodes: nodes, NextToken: next, Meta: meta}, nil
}

// UpdateEligibility marks a node eligible or ineligible. Becoming eligible
// evaluates the jobs that may now use the node. Nothing is written when
// the node already has the eligibility asked for.
func (s *nodeService) UpdateEligibility(ctx context.Context, req *droverv1.UpdateNodeEligibilityRequest) (*droverv1.UpdateNodeEligibilityResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	snap, node, err := s.nodeToChange(req.GetNodeId())
	if err != nil {
		return nil, err
	}
	eligible := req.GetEligibility() == droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE
	if eligible && node.GetDrainStrategy() != nil {
		return nil, fmt.Errorf("node %s is draining; end the drain to make it eligible: %w", node.GetId(), ErrFailedPrecondition)
	}
	if node.GetSchedulingEligibility() == req.GetEligibility() {
		return &droverv1.UpdateNodeEligibilityResponse{}, nil
	}
	now := time.Now().UnixNano()
	entry := &droverv1.NodeEligibilityEntry{
		NodeId:      node.GetId(),
		Eligibility: req.GetEligibility(),
		UpdatedAt:   now,
		Event: &droverv1.NodeEvent{
			Message: fmt.Sprintf("Node marked %s for scheduling", eligibilityWord(req.GetEligibility())), Subsystem: "Cluster", Time: now,
		},
	}
	if eligible {
		entry.Evals = NodeEvals(snap, node, now)
	}
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeNodeEligibility, entry)
	if err != nil {
		return nil, err
	}
	return &droverv1.UpdateNodeEligibilityResponse{Index: index, EvalIds: evalIDs(entry.Evals)}, nil
}

func eligibilityWord(e droverv1.SchedulingEligibility) string {
	if e == droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE {
		return "ineligible"
	}
	return "eligible"
}

// UpdateDrain starts or ends a drain. Starting one makes the node
// ineligible and nothing more: the leader's drainer then marks its
// allocations to migrate in turns, and ends the drain once none is left.
// Nothing is written for ending a drain that is not running, unless the
// node is to become eligible.
func (s *nodeService) UpdateDrain(ctx context.Context, req *droverv1.UpdateNodeDrainRequest) (*droverv1.UpdateNodeDrainResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	snap, node, err := s.nodeToChange(req.GetNodeId())
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	entry := &droverv1.NodeDrainEntry{NodeId: node.GetId(), UpdatedAt: now, ExpectedModifyIndex: node.GetModifyIndex()}
	switch {
	case req.GetEnable():
		entry.DrainStrategy = &droverv1.DrainStrategy{IgnoreSystemJobs: req.GetIgnoreSystemJobs(), StartedAt: now}
		switch d := req.EffectiveDeadline(); {
		case req.GetForce():
			entry.DrainStrategy.Deadline = now
		case d > 0:
			entry.DrainStrategy.Deadline = now + int64(d)
		}
		entry.Event = &droverv1.NodeEvent{Message: droverv1.NodeEventDrainStarted, Subsystem: droverv1.NodeEventSubsystemDrain, Time: now}
	case node.GetDrainStrategy() == nil && (!req.GetMarkEligible() ||
		node.GetSchedulingEligibility() == droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE):
		return &droverv1.UpdateNodeDrainResponse{}, nil
	default:
		entry.MarkEligible = req.GetMarkEligible()
		entry.Event = &droverv1.NodeEvent{Message: droverv1.NodeEventDrainStopped, Subsystem: droverv1.NodeEventSubsystemDrain, Time: now}
		if entry.MarkEligible {
			entry.Evals = NodeEvals(snap, node, now)
		}
	}
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeNodeDrain, entry)
	if err != nil {
		return nil, err
	}
	return &droverv1.UpdateNodeDrainResponse{Index: index, EvalIds: evalIDs(entry.Evals)}, nil
}

// nodeToChange reads the newest state and the node an operator change is
// about.
func (s *nodeService) nodeToChange(id string) (*state.Snapshot, *droverv1.Node, error) {
	snap := s.backend.State().Snapshot()
	node := snap.NodeByID(id)
	if node == nil {
		return nil, nil, fmt.Errorf("node %s: %w", id, state.ErrNotFound)
	}
	return snap, node, nil
}

func evalIDs(evals []*droverv1.Evaluation) []string {
	ids := make([]string, 0, len(evals))
	for _, ev := range evals {
		ids = append(ids, ev.GetId())
	}
	return ids
}
