package plan

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
	"github.com/droverhq/drover/scheduler/fit"
	"github.com/droverhq/drover/scheduler/ippool"
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
// may be committed, in plan order, and the nodes that may not. An accepted
// node plan is the plan's own, or a copy whose placements got other
// addresses.
type verification struct {
	accepted []*droverv1.NodePlan
	rejected []rejection
	// replaced counts the placements that got another address,
	// portsReplaced the dynamic ports given another number, relocated the
	// placements put on one of their alternates.
	replaced, portsReplaced, relocated int
}

// verifier checks the nodes of one plan against a snapshot, with the
// allocations of the plans in flight and of the plan's nodes accepted so far
// laid over it.
type verifier struct {
	plan     *droverv1.Plan
	snap     *state.Snapshot
	inflight *overlay
	accepted *overlay
	// pool is the allocation network replacement addresses come from.
	pool netip.Prefix
	// asked are the addresses the plan's allocations ask for: a
	// replacement never takes one that a later node of the plan wants.
	asked map[string]struct{}
	// picker hands out replacement addresses; made on first need.
	picker                             *ippool.Picker
	replaced, portsReplaced, relocated int
	// room is what each node a placement was relocated to or tried on
	// holds, with everything accepted so far, frozen; roomLayers counts
	// the placements laid on it since it was counted (relocate.go).
	room       map[string]*fit.Usage
	roomLayers map[string]int
	// usage is the server's cache of what nodes' stored allocations hold,
	// or nil: a room starts from it when it can.
	usage *scheduler.UsageCache
}

// verifyPlan checks each node of p against snap and inflight (which may
// be nil). Nodes are checked in plan order, and each accepted node's
// allocations count against the nodes after it. A new placement whose
// address is no longer free gets another from pool (when valid). The new
// placements of a node that no longer takes them all are then placed one
// at a time, on their node or on their alternates (relocate.go).
func verifyPlan(snap *state.Snapshot, p *droverv1.Plan, inflight *overlay, pool netip.Prefix, usage *scheduler.UsageCache) verification {
	v := &verifier{plan: p, snap: snap, inflight: inflight, accepted: newOverlay(), pool: pool, usage: usage}
	var out verification
	var moving []displaced
	at := make(map[string]int, len(p.GetNodePlans()))
	for _, np := range p.GetNodePlans() {
		checked, reason := v.nodePlan(np)
		if reason != "" {
			if v.relocatable(np) {
				moving = append(moving, displaced{np: np, reason: reason})
				continue
			}
			out.rejected = append(out.rejected, rejection{nodeID: np.GetNodeId(), reason: reason})
			continue
		}
		v.accepted.add(checked.GetAllocations())
		at[checked.GetNodeId()] = len(out.accepted)
		out.accepted = append(out.accepted, checked)
	}
	// After every node plan that fits as planned, so that a relocated
	// placement never takes room its own plan counted on.
	for _, d := range moving {
		if lost := v.relocate(d, &out, at); lost > 0 {
			out.rejected = append(out.rejected, rejection{nodeID: d.np.GetNodeId(), reason: lostReason(d, lost)})
		}
	}
	out.replaced, out.portsReplaced, out.relocated = v.replaced, v.portsReplaced, v.relocated
	return out
}

// nodePlan returns the node plan to commit and "", or the plan and why
// it may not be committed.
func (v *verifier) nodePlan(np *droverv1.NodePlan) (*droverv1.NodePlan, string) {
	planned := np.GetAllocations()
	if len(planned) == 0 {
		// Stopping never needs capacity.
		return np, ""
	}
	for _, a := range planned {
		if a.GetNodeId() != np.GetNodeId() {
			// It would be counted here but placed there.
			return np, fmt.Sprintf("allocation %s is for node %s", a.GetId(), a.GetNodeId())
		}
	}
	node := v.snap.NodeByID(np.GetNodeId())
	if node == nil {
		return np, reasonNodeMissing
	}
	existing := v.snap.NodeAllocsShared(node.GetId()) // read only
	count, reason := admit(node, planned, existing)
	if reason != "" {
		return np, reason
	}
	// Addresses first: the fit check counts the node's addresses too.
	withAddrs, reason := v.assignAddresses(np)
	if reason != "" {
		return np, reason
	}
	if !count {
		return withAddrs, ""
	}
	usage, reason := v.cachedHeld(node, withAddrs, existing), ""
	if usage == nil {
		usage, reason = heldUsage(node, v.held(node.GetId(), withAddrs, existing))
	}
	withPorts := v.assignPorts(node, withAddrs, usage)
	if _, failed := fitOnto(usage, withPorts.GetAllocations()); reason == "" {
		reason = failed
	}
	if reason != "" {
		return np, reason
	}
	return withPorts, ""
}

// cachedHeld returns what held counts, taken from the usage cache: the
// cached usage of the node's stored allocations with the in-flight and
// accepted ones on top (cachedRoom). Counting every allocation of a node
// for each of its node plans was most of the applier's CPU in c1m. It
// returns nil where the cache could count differently: without a cache,
// when the node plan marks an allocation lost (which frees it) or places
// one again that the node holds (held leaves both out), when an in-flight
// or accepted allocation changes another, or when what is held does not
// fit by itself (heldUsage names why).
//
// Otherwise the plan's allocations counted on top fail for the same
// reason as on held: the sums are the same whatever the order, and what
// is held holds each port and address once, so a collision names the
// same holder.
func (v *verifier) cachedHeld(node *droverv1.Node, np *droverv1.NodePlan, row []*droverv1.Allocation) *fit.Usage {
	if v.usage == nil {
		return nil
	}
	for _, s := range np.GetStops() {
		if s.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST {
			return nil
		}
	}
	for _, a := range np.GetAllocations() {
		if inRow(row, a.GetId()) || v.inflight.alloc(a.GetId()) != nil || v.accepted.alloc(a.GetId()) != nil {
			return nil
		}
	}
	if u := v.cachedRoom(node, row); u != nil && u.Failed() == "" {
		return u
	}
	return nil
}

// inRow reports whether a node's allocation row, which the state keeps in
// id order, has the allocation.
func inRow(row []*droverv1.Allocation, id string) bool {
	_, found := slices.BinarySearchFunc(row, id, func(a *droverv1.Allocation, id string) int {
		return strings.Compare(a.GetId(), id)
	})
	return found
}

// heldUsage counts held on the node, in order, and freezes the count. It
// returns the first reason held alone does not fit (a node whose resources
// shrank), or "". Adding the plan's allocations on top then gives the
// same reason as fit.AllocsFit over held and them.
func heldUsage(node *droverv1.Node, held []*droverv1.Allocation) (*fit.Usage, string) {
	usage, reason := fit.NewUsage(node), ""
	for _, a := range held {
		if failed := usage.Add(a); reason == "" {
			reason = failed
		}
	}
	return usage.Freeze(), reason
}

// fitOnto counts allocs on top of the frozen usage, in a new layer it
// returns, with the first reason they do not fit, or "".
func fitOnto(usage *fit.Usage, allocs []*droverv1.Allocation) (*fit.Usage, string) {
	layer, reason := usage.Overlay(), ""
	for _, a := range allocs {
		if failed := layer.Add(a); reason == "" {
			reason = failed
		}
	}
	return layer, reason
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
// node, whose allocation row existing is.
func updatesOnly(planned, existing []*droverv1.Allocation) bool {
	for _, a := range planned {
		if !inRow(existing, a.GetId()) {
			return false
		}
	}
	return true
}

// held returns what the node holds before the node plan's placements: its
// allocations that hold resources, with the in-flight and accepted ones
// laid over them, less those this plan marks lost (a plain stop frees
// nothing: the agent may still run the allocation) and those the node plan
// places again. They come in id order, so that a fit check over them and
// then the plan's allocations gives the same reason on every run and
// names the holder of a port or address the plan wants.
func (v *verifier) held(nodeID string, np *droverv1.NodePlan, existing []*droverv1.Allocation) []*droverv1.Allocation {
	proposed := make(map[string]*droverv1.Allocation, len(existing)+len(np.GetAllocations()))
	for _, a := range existing {
		if fit.Holds(a) {
			proposed[a.GetId()] = a
		}
	}
	for _, a := range v.inflight.onNode(nodeID) {
		proposed[a.GetId()] = a
	}
	for _, a := range v.accepted.onNode(nodeID) {
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
	return slices.SortedFunc(maps.Values(proposed), func(a, b *droverv1.Allocation) int {
		return strings.Compare(a.GetId(), b.GetId())
	})
}

// assignAddresses checks that no planned allocation takes an address that
// another allocation anywhere in the cluster holds: in the snapshot, in
// the plans in flight, on a node of this plan accepted earlier, or on this
// same node; nor one released again since the plan's snapshot. A new placement whose address is held gets the address the
// scheduler would pick on this newest state (never-used, else released
// longest ago) in a copy of the node plan; concurrent plans all want the
// oldest released addresses, and this way the later one is not dropped for
// it. Without a free address, or for an allocation that exists already,
// the node is rejected.
func (v *verifier) assignAddresses(np *droverv1.NodePlan) (*droverv1.NodePlan, string) {
	planned := np.GetAllocations()
	var out []*droverv1.Allocation
	var here map[string]string
	for i, a := range planned {
		ip := a.GetResources().GetIp()
		if ip == "" || !fit.Holds(a) {
			continue
		}
		if reason := v.ipTaken(a.GetId(), ip, here); reason != "" {
			repl, ok := v.replacement(a)
			if !ok {
				return np, reason
			}
			if out == nil {
				out = slices.Clone(planned)
			}
			a = a.CloneVT()
			a.Resources.Ip = repl.String()
			out[i], ip = a, a.GetResources().GetIp()
			v.replaced++
		}
		if here == nil {
			here = make(map[string]string, len(planned))
		}
		here[ip] = a.GetId()
	}
	if out == nil {
		return np, ""
	}
	return &droverv1.NodePlan{NodeId: np.GetNodeId(), Allocations: out, Stops: np.GetStops()}, ""
}

// ipTaken returns why the allocation may not hold ip, or "" if it may.
// here maps the addresses of the node plan's allocations before it to
// their holders.
func (v *verifier) ipTaken(id, ip string, here map[string]string) string {
	if holder, dup := here[ip]; dup && holder != id {
		return ipTaken(ip, holder)
	}
	if v.heldBySelf(id, ip) {
		return ""
	}
	if holder := v.accepted.ipHolder(ip); holder != "" && holder != id {
		return ipTaken(ip, holder)
	}
	if holder := v.inflight.ipHolder(ip); holder != "" && holder != id {
		return ipTaken(ip, holder)
	}
	if v.snap.AllocIPHeld(ip) {
		return fmt.Sprintf("%s %s already held by another allocation", fit.DimensionIP, ip)
	}
	if at := v.snap.IPReleasedAt(ip); at > v.plan.GetSnapshotIndex() {
		// Held and released again since the scheduler saw it: it is now
		// the most recently released, not the oldest it was picked as.
		return fmt.Sprintf("%s %s released again at index %d, after the plan's snapshot", fit.DimensionIP, ip, at)
	}
	return ""
}

// replacement returns a free address for a new placement, the one the
// scheduler would have picked on this state; ok is false for an
// allocation that exists already (its address is not the applier's to
// change) or when the network has no free address.
func (v *verifier) replacement(a *droverv1.Allocation) (netip.Addr, bool) {
	if !v.pool.IsValid() || v.accepted.alloc(a.GetId()) != nil || v.inflight.alloc(a.GetId()) != nil ||
		v.snap.AllocByID(a.GetId()) != nil {
		return netip.Addr{}, false
	}
	if v.picker == nil {
		v.asked = make(map[string]struct{})
		for _, np := range v.plan.GetNodePlans() {
			for _, b := range np.GetAllocations() {
				if ip := b.GetResources().GetIp(); ip != "" && fit.Holds(b) {
					v.asked[ip] = struct{}{}
				}
			}
		}
		v.picker = ippool.New(v.pool, v.snap, v.unavailable, rand.Uint64N)
	}
	return v.picker.Pick()
}

// unavailable reports whether an address the snapshot counts as free is
// held by an allocation laid over it or asked for by this plan.
func (v *verifier) unavailable(addr netip.Addr) bool {
	ip := addr.String()
	if _, ok := v.asked[ip]; ok {
		return true
	}
	return v.accepted.ipHolder(ip) != "" || v.inflight.ipHolder(ip) != ""
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
