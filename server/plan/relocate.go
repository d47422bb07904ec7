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
		if !v.hasRoom(nodeID, a.GetResources()) {
			continue
		}
		moved := a
		if i > 0 {
			moved = a.CloneVT()
			moved.NodeId = nodeID
		}
		np, reason := v.nodePlan(&droverv1.NodePlan{NodeId: nodeID, Allocations: []*droverv1.Allocation{moved}})
		if reason != "" {
			continue
		}
		v.accepted.add(np.GetAllocations())
		for _, b := range np.GetAllocations() {
			v.room[nodeID].Add(b)
		}
		merge(out, at, np)
		if i > 0 {
			v.relocated++
		}
		return true
	}
	return false
}

// hasRoom reports whether the node has the cpu, memory and disk for r on
// top of what it holds with everything accepted so far. It is what most
// candidates fail on, and answering it from a usage kept per node spares
// them the whole check of a node plan, which counts every allocation of
// the node again.
func (v *verifier) hasRoom(nodeID string, r *droverv1.AllocatedResources) bool {
	if v.room == nil {
		v.room = make(map[string]*fit.Usage)
	}
	u, ok := v.room[nodeID]
	if !ok {
		if node := v.snap.NodeByID(nodeID); node != nil {
			u = fit.NewUsage(node)
			for _, a := range v.held(nodeID, &droverv1.NodePlan{NodeId: nodeID}, v.snap.NodeAllocsShared(nodeID)) {
				u.Add(a)
			}
		}
		v.room[nodeID] = u
	}
	return u != nil && u.Fits(&droverv1.Resources{CpuMhz: r.GetCpuMhz(), MemoryMb: r.GetMemoryMb(), DiskMb: r.GetDiskMb()}) == ""
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
