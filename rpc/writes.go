package rpc

import (
	"context"
	"time"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/groupcommit"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Bounds on shared entries: reports of at most maxReportAllocs allocations
// (the state store's bound: larger entries cost a walk of the whole
// allocation tree), at most maxRegistrations nodes and at most
// maxStatusUpdates heartbeats' status changes go into one raft entry.
const (
	maxReportAllocs  = state.ReportAllocsPerEntry
	maxRegistrations = 512
	maxStatusUpdates = 512
)

func (s *services) newCommitters(reportWindow time.Duration) {
	s.reports = &groupcommit.Committer[*droverv1.NodeAllocUpdates]{
		Window: reportWindow, MaxWeight: maxReportAllocs, Write: s.writeReports,
	}
	s.registrations = &groupcommit.Committer[*droverv1.Node]{
		MaxWeight: maxRegistrations, Write: s.writeRegistrations,
	}
	s.statuses = &groupcommit.Committer[*droverv1.NodeStatusEntry]{
		MaxWeight: maxStatusUpdates, Write: s.writeStatuses,
	}
}

// writeReports writes agents' allocation reports as one entry: an
// AllocClientReport, which leaves the rows of nodes that already reported
// alone, once every server knows it; an AllocClientUpdate before.
func (s *services) writeReports(groups []*droverv1.NodeAllocUpdates) (uint64, any, error) {
	now := time.Now().UnixNano()
	for _, g := range groups {
		for _, ev := range g.GetEvals() {
			ev.CreateTime, ev.ModifyTime = now, now
		}
	}
	msgType := droverv1.MessageTypeAllocClientUpdate
	if s.backend.EntryTypeKnown(droverv1.MessageTypeAllocClientReport) {
		msgType = droverv1.MessageTypeAllocClientReport
	}
	index, resp, err := s.backend.Apply(context.Background(), msgType,
		&droverv1.AllocClientUpdateEntry{Nodes: groups, UpdatedAt: now})
	if err != nil {
		s.logger.Warn("writing allocation reports failed", "nodes", len(groups), "err", err)
	}
	return index, resp, err
}

// writeRegistrations writes node registrations as one entry.
func (s *services) writeRegistrations(nodes []*droverv1.Node) (uint64, any, error) {
	index, resp, err := s.backend.Apply(context.Background(), droverv1.MessageTypeNodeRegister,
		&droverv1.NodeRegisterEntry{Nodes: nodes, RegisteredAt: time.Now().UnixNano()})
	if err != nil {
		s.logger.Warn("writing node registrations failed", "nodes", len(nodes), "err", err)
	}
	return index, resp, err
}

// writeStatuses writes heartbeats' status changes as one entry.
func (s *services) writeStatuses(updates []*droverv1.NodeStatusEntry) (uint64, any, error) {
	index, resp, err := s.backend.Apply(context.Background(), droverv1.MessageTypeNodeStatusBatch,
		&droverv1.NodeStatusBatchEntry{Updates: updates})
	if err != nil {
		s.logger.Warn("writing node status changes failed", "nodes", len(updates), "err", err)
	}
	return index, resp, err
}
