package rpc

import (
	"context"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Usage returns one page of nodes in id order, each with the CPU and memory
// its allocations hold, all read from one state snapshot. It serves the web
// UI's topology view, which would otherwise have to download every
// allocation of the cluster to draw one bar per node.
func (s *nodeService) Usage(ctx context.Context, req *droverv1.NodeUsageRequest) (*droverv1.NodeUsageResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	resp := &droverv1.NodeUsageResponse{}
	meta, err := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		nodes, next := snap.ListNodes(pageOf(req.GetPage()))
		// A blocking query runs this again on every wake-up: start afresh.
		resp.Nodes, resp.NextToken = make([]*droverv1.NodeUsage, 0, len(nodes)), next
		for _, n := range nodes {
			allocs, _ := snap.AllocsByNode(n.GetId())
			resp.Nodes = append(resp.Nodes, usageOf(n, allocs))
		}
		// Agents' reports (an allocation completing) change what is held
		// without moving the node sets' index; they do move the
		// allocations table's.
		return atLeastOne(max(snap.TableIndex(state.TableNodes), snap.TableIndex(state.TableAllocs))), nil
	})
	if err != nil {
		return nil, err
	}
	resp.Meta = meta
	return resp, nil
}

// usageOf describes a node and sums the CPU and memory its allocations
// hold. Capacity and holding follow the scheduler's arithmetic
// (scheduler/fit, which rpc may not import; node_usage_test.go checks that
// the two agree): a node offers its resources minus what it reserves, and
// an allocation holds its resources until it is client-terminal (complete,
// failed or lost), even once the servers want it stopped, since its agent
// may still be running it.
func usageOf(n *droverv1.Node, allocs []*droverv1.Allocation) *droverv1.NodeUsage {
	res, rsv := n.GetResources(), n.GetReserved()
	u := &droverv1.NodeUsage{
		Id:                    n.GetId(),
		Name:                  n.GetName(),
		Datacenter:            n.GetDatacenter(),
		NodeClass:             n.GetNodeClass(),
		Status:                n.GetStatus(),
		SchedulingEligibility: n.GetSchedulingEligibility(),
		Draining:              n.GetDrainStrategy() != nil,
		Capacity: &droverv1.CpuMemory{
			CpuMhz:   res.GetCpuMhz() - rsv.GetCpuMhz(),
			MemoryMb: res.GetMemoryMb() - rsv.GetMemoryMb(),
		},
		Used:        &droverv1.CpuMemory{},
		ModifyIndex: n.GetModifyIndex(),
	}
	for _, a := range allocs {
		if a.ClientTerminal() {
			continue
		}
		u.Used.CpuMhz += a.GetResources().GetCpuMhz()
		u.Used.MemoryMb += a.GetResources().GetMemoryMb()
	}
	return u
}
