package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// Reasons a node's part of a plan is rejected before its resources are
// counted; resource reasons come from fit.AllocsFit.
const (
	reasonNodeMissing  = "node does not exist"
	reasonDisconnected = "node is disconnected and contains invalid updates"
	reasonDown         = "node is down and contains invalid updates"
	reasonNotReady     = "node is not ready for placements"
	reasonIneligible   = "node is not eligible"
)

// rejection is a node whose part of a plan was dropped, and why.
type rejection struct {
	nodeID, reason string
}

// verification is the outcome of checking one plan: the node plans that
// may be committed, in plan order, and the nodes that may not.
type verification struct {
	accepted []*droverv1.NodePlan
	rejected []rejection
}

// verifier checks the nodes of one plan against a snapshot, with the
// allocations of the plan in flight and of the plan's nodes accepted so far
// laid over it.
type verifier struct {
	snap     *state.Snapshot
	inflight *overlay
	accepted *overlay
}

// verifyPlan checks each node of p against snap and inflight (which may
// be nil). Nodes are checked in plan order, and each accepted node's
// allocations count against the nodes after it.
func verifyPlan(snap *state.Snapshot, p *droverv1.Plan, inflight *overlay) verification {
	v := &verifier{snap: snap, inflight: inflight, accepted: newOverlay()}
	var out verification
	for _, np := range p.GetNodePlans() {
		if reason := v.nodePlan(np); reason != "" {
			out.rejected = append(out.rejected, rejection{nodeID: np.GetNodeId(), reason: reason})
			continue
		}
		v.accepted.add(np.GetAllocations())
		out.accepted = append(out.accepted, np)
	}
	return out
}

// nodePlan returns "" if the node plan may be committed, else why not.
func (v *verifier) nodePlan(np *droverv1.NodePlan) string {
	planned := np.GetAllocations()
	if len(planned) == 0 {
		// Stopping never needs capacity.
		return ""
	}
	for _, a := range planned {
		if a.GetNodeId() != np.GetNodeId() {
			// It would be counted here but placed there.
			return fmt.Sprintf("allocation %s is for node %s", a.GetId(), a.GetNodeId())
		}
	}
	node := v.snap.NodeByID(np.GetNodeId())
	if node == nil {
		return reasonNodeMissing
	}
	existing, _ := v.snap.AllocsByNode(node.GetId())
	count, reason := admit(node, planned, existing)
	if reason != "" {
		return reason
	}
	if count {
		if reason := v.fits(node, np, existing); reason != "" {
			return reason
		}
	}
	return v.addressesFree(planned)
}

// admit applies the node's status and eligibility to the planned
// allocations. count says whether their resources must then be counted:
// updates of allocations already on the node need no new capacity.
func admit(node *droverv1.Node, planned, existing []*droverv1.Allocation) (count bool, reason string) {
	switch node.GetStatus() {
	case droverv1.NodeStatus_NODE_STATUS_DISCONNECTED:
		// Only recording that the node's allocations are unknown.
		if allClientStatus(planned, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN) {
			return false, ""
		}
		return false, reasonDisconnected
	case droverv1.NodeStatus_NODE_STATUS_DOWN:
		// Only recording that the node's allocations are lost or unknown.
		if allClientStatus(planned, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST,
			droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN) {
			return false, ""
		}
		return false, reasonDown
	case droverv1.NodeStatus_NODE_STATUS_READY:
	default:
		return false, reasonNotReady
	}
	if updatesOnly(planned, existing) {
		// An in-place update may go to a node that takes no new work.
		return false, ""
	}
	if node.GetSchedulingEligibility() == droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE ||
		node.GetDrainStrategy() != nil {
		return false, reasonIneligible
	}
	return true, ""
}

func allClientStatus(allocs []*droverv1.Allocation, statuses ...droverv1.AllocClientStatus) bool {
	for _, a := range allocs {
		if !slices.Contains(statuses, a.GetClientStatus()) {
			return false
		}
	}
	return true
}

// updatesOnly reports whether every planned allocation is already on the
// node.
func updatesOnly(planned, existing []*droverv1.Allocation) bool {
	ids := make(map[string]struct{}, len(existing))
	for _, a := range existing {
		ids[a.GetId()] = struct{}{}
	}
	for _, a := range planned {
		if _, ok := ids[a.GetId()]; !ok {
			return false
		}
	}
	return true
}

// fits counts what the node would hold once the plan is applied: its
// allocations that hold resources, with the in-flight and accepted ones
// laid over them, less those this plan marks lost (a plain stop frees
// nothing: the agent may still run the allocation), plus the planned ones.
func (v *verifier) fits(node *droverv1.Node, np *droverv1.NodePlan, existing []*droverv1.Allocation) string {
	proposed := make(map[string]*droverv1.Allocation, len(existing)+len(np.GetAllocations()))
	for _, a := range existing {
		if fit.Holds(a) {
			proposed[a.GetId()] = a
		}
	}
	for _, a := range v.inflight.onNode(node.GetId()) {
		proposed[a.GetId()] = a
	}
	for _, a := range v.accepted.onNode(node.GetId()) {
		proposed[a.GetId()] = a
	}
	for _, s := range np.GetStops() {
		if s.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST {
			delete(proposed, s.GetAllocId())
		}
	}
	for _, a := range np.GetAllocations() {
		delete(proposed, a.GetId())
	}
	// What is held first, in id order, then the plan's allocations: the
	// reason given is the same on every run and names the holder of a
	// port or address the plan wants.
	allocs := slices.SortedFunc(maps.Values(proposed), func(a, b *droverv1.Allocation) int {
		return strings.Compare(a.GetId(), b.GetId())
	})
	allocs = append(allocs, np.GetAllocations()...)
	if ok, reason, _ := fit.AllocsFit(node, allocs); !ok {
		return reason
	}
	return ""
}

// addressesFree checks that no planned allocation takes an address that
// another allocation anywhere in the cluster holds: in the snapshot, in
// the plan in flight, on a node of this plan accepted earlier, or on this
// same node.
func (v *verifier) addressesFree(planned []*droverv1.Allocation) string {
	var here map[string]string
	for _, a := range planned {
		ip := a.GetResources().GetIp()
		if ip == "" || !fit.Holds(a) {
			continue
		}
		if holder, dup := here[ip]; dup && holder != a.GetId() {
			return ipTaken(ip, holder)
		}
		if here == nil {
			here = make(map[string]string, len(planned))
		}
		here[ip] = a.GetId()
		if v.heldBySelf(a.GetId(), ip) {
			continue
		}
		if holder := v.accepted.ipHolder(ip); holder != "" && holder != a.GetId() {
			return ipTaken(ip, holder)
		}
		if holder := v.inflight.ipHolder(ip); holder != "" && holder != a.GetId() {
			return ipTaken(ip, holder)
		}
		if v.snap.AllocIPHeld(ip) {
			return fmt.Sprintf("%s %s already held by another allocation", fit.DimensionIP, ip)
		}
	}
	return ""
}

// heldBySelf reports whether the newest known version of the allocation
// already holds the address, so keeping it takes nothing from anyone.
func (v *verifier) heldBySelf(id, ip string) bool {
	cur := v.accepted.alloc(id)
	if cur == nil {
		cur = v.inflight.alloc(id)
	}
	if cur == nil {
		cur = v.snap.AllocByID(id)
	}
	return cur != nil && fit.Holds(cur) && cur.GetResources().GetIp() == ip
}

func ipTaken(ip, holder string) string {
	return fmt.Sprintf("%s %s already held by allocation %s", fit.DimensionIP, ip, holder)
}
