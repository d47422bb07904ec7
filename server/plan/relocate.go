package plan

import (
	"fmt"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// Plans of evaluations scheduled at the same time are built from the same
// state, and bin packing ranks the same fullest nodes first in each: the
// later plan finds nodes the earlier one filled. Rather than drop such a
// node's placements and send the worker to plan again, the applier places
// them one at a time: on their own node while they still fit there, then
// on the first of the nodes the scheduler ranked next (NodePlan.alternates)
// that takes them, each checked exactly as a node plan is.

// displaced is a rejected node plan whose placements may go elsewhere.
type displaced struct {
	np     *droverv1.NodePlan
	reason string
}

// relocatable reports whether a rejected node plan's placements may be
// placed one at a time: the node plan names alternates, and only
// places new allocations (no stops, no new versions of existing ones,
// which belong on their node).
func (v *verifier) relocatable(np *droverv1.NodePlan) bool {
	if len(np.GetAlternates()) != len(np.GetAllocations()) || len(np.GetStops()) > 0 || len(np.GetAllocations()) == 0 {
		return false
	}
	for _, a := range np.GetAllocations() {
		if a.GetNodeId() != np.GetNodeId() || !fit.Holds(a) ||
			v.snap.AllocByID(a.GetId()) != nil || v.inflight.alloc(a.GetId()) != nil {
			return false
		}
	}
	return true
}

// relocate places the allocations of a displaced node plan one at a time
// and returns how many found no node.
func (v *verifier) relocate(d displaced, out *verification, at map[string]int) (lost int) {
	for i, a := range d.np.GetAllocations() {
		if !v.placeOne(a, d.np.GetAlternates()[i], out, at) {
			lost++
		}
	}
	return lost
}

// placeOne accepts the allocation on the first of its candidate nodes that
// takes it, reporting false when none does.
func (v *verifier) placeOne(a *droverv1.Allocation, alts *droverv1.PlacementAlternates, out *verification, at map[string]int) bool {
	for i, nodeID := range v.candidates(a, alts) {
		room := v.roomOn(nodeID)
		r := a.GetResources()
		if room == nil || room.Fits(&droverv1.Resources{CpuMhz: r.GetCpuMhz(), MemoryMb: r.GetMemoryMb(), DiskMb: r.GetDiskMb()}) != "" {
			// What most candidates fail on, answered without a check.
			continue
		}
		moved := a
		if i > 0 {
			moved = a.CloneVT()
			moved.NodeId = nodeID
		}
		np, layer, reason := v.placeOn(room, moved)
		if reason != "" {
			continue
		}
		v.accepted.add(np.GetAllocations())
		v.keepRoom(nodeID, layer)
		merge(out, at, np)
		if i > 0 {
			v.relocated++
		}
		return true
	}
	return false
}

// placeOn checks one new placement against room, what its node holds with
// everything accepted so far, as nodePlan checks a node plan of it alone:
// status and eligibility, its address, a dynamic port held meanwhile given
// another, and fit. It returns the node plan to commit and room with the
// placement counted, or why the node does not take it. It never counts the
// node's allocations again: that is what made relocating costly.
func (v *verifier) placeOn(room *fit.Usage, a *droverv1.Allocation) (*droverv1.NodePlan, *fit.Usage, string) {
	node := room.Node()
	np := &droverv1.NodePlan{NodeId: node.GetId(), Allocations: []*droverv1.Allocation{a}}
	// No existing allocations: a relocatable placement is new.
	if _, reason := admit(node, np.GetAllocations(), nil); reason != "" {
		return nil, nil, reason
	}
	withAddrs, reason := v.assignAddresses(np)
	if reason != "" {
		return nil, nil, reason
	}
	withPorts := v.assignPorts(node, withAddrs, room)
	layer, reason := fitOnto(room, withPorts.GetAllocations())
	if reason != "" {
		return nil, nil, reason
	}
	return withPorts, layer, ""
}

// maxRoomLayers bounds the layers a node's room gathers, one per placement
// relocated onto the node, before it is counted afresh: every port lookup
// walks them.
const maxRoomLayers = 16

// roomOn returns what the node holds with everything accepted so far,
// frozen, counting it on first use; nil if the node is gone.
func (v *verifier) roomOn(nodeID string) *fit.Usage {
	if u, ok := v.room[nodeID]; ok {
		return u
	}
	if v.room == nil {
		v.room = make(map[string]*fit.Usage)
		v.roomLayers = make(map[string]int)
	}
	var u *fit.Usage
	if node := v.snap.NodeByID(nodeID); node != nil {
		u = v.countRoom(node)
	}
	v.room[nodeID] = u
	v.roomLayers[nodeID] = 0
	return u
}

// countRoom counts what the node holds with everything accepted so far:
// from the usage cache when it can (cachedRoom), else every allocation
// again.
func (v *verifier) countRoom(node *droverv1.Node) *fit.Usage {
	row := v.snap.NodeAllocsShared(node.GetId()) // read only
	if u := v.cachedRoom(node, row); u != nil {
		return u
	}
	u, _ := heldUsage(node, v.held(node.GetId(), &droverv1.NodePlan{NodeId: node.GetId()}, row))
	return u
}

// cachedRoom returns, frozen, the cached usage of the node's stored
// allocations (row) with the in-flight and accepted ones on top; nil
// without a cache, or when those do more than add allocations (one of them
// changes a stored allocation, or accepted changes an in-flight one).
func (v *verifier) cachedRoom(node *droverv1.Node, row []*droverv1.Allocation) *fit.Usage {
	if v.usage == nil {
		return nil
	}
	inflight, accepted := v.inflight.onNode(node.GetId()), v.accepted.onNode(node.GetId())
	if !v.onlyAdds(row, inflight, accepted) {
		return nil
	}
	u := v.usage.Base(node, row)
	if len(inflight)+len(accepted) == 0 {
		return u
	}
	u = u.Overlay()
	for _, a := range inflight {
		u.Add(a)
	}
	for _, a := range accepted {
		u.Add(a)
	}
	return u.Freeze()
}

// onlyAdds reports whether the in-flight and accepted allocations of a
// node are all new: none is in the node's stored row, and none accepted is
// in flight. The row stands for the whole state: an allocation never moves
// to another node (the FSM refuses that).
func (v *verifier) onlyAdds(row, inflight, accepted []*droverv1.Allocation) bool {
	for _, a := range inflight {
		if inRow(row, a.GetId()) {
			return false
		}
	}
	for _, a := range accepted {
		if inRow(row, a.GetId()) || v.inflight.alloc(a.GetId()) != nil {
			return false
		}
	}
	return true
}

// keepRoom makes layer, the node's room with a placement accepted on top,
// the node's room.
func (v *verifier) keepRoom(nodeID string, layer *fit.Usage) {
	if v.roomLayers[nodeID]++; v.roomLayers[nodeID] < maxRoomLayers {
		v.room[nodeID] = layer.Freeze()
		return
	}
	delete(v.room, nodeID) // counted afresh, with the accepted ones, on next use
}

// candidates are the nodes an allocation may go to, in order: its own,
// then the alternates the plan names for it.
func (v *verifier) candidates(a *droverv1.Allocation, alts *droverv1.PlacementAlternates) []string {
	names := v.plan.GetAlternateNodes()
	out := make([]string, 0, 1+len(alts.GetNodes()))
	out = append(out, a.GetNodeId())
	for _, i := range alts.GetNodes() {
		if int(i) < len(names) && !slices.Contains(out, names[i]) {
			out = append(out, names[i])
		}
	}
	return out
}

// merge adds an accepted node plan of one allocation to the verification:
// to a copy of the node's accepted node plan if it has one, else as a node
// plan of its own. at maps node ids to their position in out.accepted.
func merge(out *verification, at map[string]int, np *droverv1.NodePlan) {
	i, ok := at[np.GetNodeId()]
	if !ok {
		at[np.GetNodeId()] = len(out.accepted)
		out.accepted = append(out.accepted, np)
		return
	}
	cur := out.accepted[i]
	out.accepted[i] = &droverv1.NodePlan{
		NodeId:      cur.GetNodeId(),
		Allocations: append(slices.Clip(cur.GetAllocations()), np.GetAllocations()...),
		Stops:       cur.GetStops(),
	}
}

// lostReason is why a displaced node plan is rejected when some of its
// placements found no node.
func lostReason(d displaced, lost int) string {
	if lost == len(d.np.GetAllocations()) {
		return d.reason
	}
	return fmt.Sprintf("%s (%d of %d placements kept or placed on an alternate)", d.reason, len(d.np.GetAllocations())-lost, len(d.np.GetAllocations()))
}
