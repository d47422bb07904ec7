package plan

import (
	"math/rand/v2"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// assignPorts gives each new placement of the node plan whose dynamic port
// is held meanwhile (in usage, what the node holds with the in-flight and
// accepted plans laid over it, or by a placement of the node plan before
// it) another free port of the node's dynamic range, in
// a copy of the node plan. Workers placing different jobs at the same time
// draw dynamic ports independently, so on a node both use, one port in
// about 12,000 collides; without this the later plan would lose the node,
// and its worker a whole pass, for a number nobody chose. Static ports,
// and the ports of allocations that exist already (their agents may be
// using them), are never changed: those collisions stay rejections.
func (v *verifier) assignPorts(node *droverv1.Node, np *droverv1.NodePlan, usage *fit.Usage) *droverv1.NodePlan {
	planned := np.GetAllocations()
	if !portsCollide(usage, planned) {
		return np // the common case: no lookups of jobs and allocations
	}
	dynamic := make([]map[string]struct{}, len(planned))
	for i, a := range planned {
		dynamic[i] = v.dynamicLabels(a)
	}
	// The plan's ports that are not the applier's to change, then each
	// dynamic port as it is settled.
	asked := make(map[int32]struct{})
	for i, a := range planned {
		for _, p := range a.GetResources().GetPorts() {
			if _, isDynamic := dynamic[i][p.GetLabel()]; !isDynamic {
				asked[p.GetValue()] = struct{}{}
			}
		}
	}
	used := func(port int32) bool {
		_, ok := asked[port]
		return ok || usage.PortUsed(port)
	}
	var out []*droverv1.Allocation
	for i, a := range planned {
		if len(dynamic[i]) == 0 || !fit.Holds(a) {
			continue
		}
		for j, p := range a.GetResources().GetPorts() {
			if _, isDynamic := dynamic[i][p.GetLabel()]; !isDynamic {
				continue
			}
			port := p.GetValue()
			if used(port) {
				if free, ok := fit.FreeDynamicPort(node, used, rand.Int32N); ok {
					out = withPort(out, planned, i, j, free)
					port = free
					v.portsReplaced++
				} // else the fit check names the collision
			}
			asked[port] = struct{}{}
		}
	}
	if out == nil {
		return np
	}
	return &droverv1.NodePlan{NodeId: np.GetNodeId(), Allocations: out, Stops: np.GetStops()}
}

// portsCollide reports whether a planned allocation's port is reserved by
// the node, held (usage), or asked for twice in the node plan.
func portsCollide(usage *fit.Usage, planned []*droverv1.Allocation) bool {
	seen := make(map[int32]struct{})
	for _, a := range planned {
		if !fit.Holds(a) {
			continue
		}
		for _, p := range a.GetResources().GetPorts() {
			if _, twice := seen[p.GetValue()]; twice || usage.PortUsed(p.GetValue()) {
				return true
			}
			seen[p.GetValue()] = struct{}{}
		}
	}
	return false
}

// withPort sets port j of planned allocation i to value, in out: a copy
// of planned made on first use, holding a copy of each allocation changed.
func withPort(out, planned []*droverv1.Allocation, i, j int, value int32) []*droverv1.Allocation {
	if out == nil {
		out = slices.Clone(planned)
	}
	if out[i] == planned[i] {
		out[i] = planned[i].CloneVT()
	}
	out[i].Resources.Ports[j].Value = value
	return out
}

// dynamicLabels returns the labels of the ports the allocation's group asks
// to have chosen from the dynamic range, when the allocation is a new
// placement; nil for an allocation that exists already.
func (v *verifier) dynamicLabels(a *droverv1.Allocation) map[string]struct{} {
	if v.accepted.alloc(a.GetId()) != nil || v.inflight.alloc(a.GetId()) != nil || v.snap.AllocByID(a.GetId()) != nil {
		return nil
	}
	job := v.snap.JobVersion(a.GetJobId(), a.GetJobVersion())
	var labels map[string]struct{}
	for _, tg := range job.GetTaskGroups() {
		if tg.GetName() != a.GetTaskGroup() {
			continue
		}
		for _, p := range tg.GetResources().GetPorts() {
			if p.GetValue() == 0 {
				if labels == nil {
					labels = make(map[string]struct{})
				}
				labels[p.GetLabel()] = struct{}{}
			}
		}
	}
	return labels
}
