package plan

import (
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// overlay holds allocations that may be missing from the snapshot a plan
// is checked against: those of the plans whose raft writes are in flight, and
// those of the plan's own nodes already accepted. They are laid over the
// snapshot by allocation id, so an allocation the snapshot already holds is
// counted once.
type overlay struct {
	byID   map[string]*droverv1.Allocation
	byNode map[string][]*droverv1.Allocation
	// ips maps each address held by an overlaid allocation to its holder.
	ips map[string]string
}

func newOverlay() *overlay {
	return &overlay{
		byID:   make(map[string]*droverv1.Allocation),
		byNode: make(map[string][]*droverv1.Allocation),
		ips:    make(map[string]string),
	}
}

// add lays allocations over the snapshot; a later version of an
// allocation laid already takes its place.
func (o *overlay) add(allocs []*droverv1.Allocation) {
	for _, a := range allocs {
		if prev := o.byID[a.GetId()]; prev != nil {
			o.byNode[prev.GetNodeId()] = slices.DeleteFunc(o.byNode[prev.GetNodeId()],
				func(b *droverv1.Allocation) bool { return b.GetId() == a.GetId() })
			if ip := prev.GetResources().GetIp(); o.ips[ip] == a.GetId() {
				delete(o.ips, ip)
			}
		}
		o.byID[a.GetId()] = a
		o.byNode[a.GetNodeId()] = append(o.byNode[a.GetNodeId()], a)
		if ip := a.GetResources().GetIp(); ip != "" && fit.Holds(a) {
			o.ips[ip] = a.GetId()
		}
	}
}

// alloc returns the overlaid version of an allocation, or nil. A nil
// overlay holds nothing.
func (o *overlay) alloc(id string) *droverv1.Allocation {
	if o == nil {
		return nil
	}
	return o.byID[id]
}

// onNode returns the overlaid allocations on a node.
func (o *overlay) onNode(nodeID string) []*droverv1.Allocation {
	if o == nil {
		return nil
	}
	return o.byNode[nodeID]
}

// ipHolder returns the overlaid allocation holding the address, or "".
func (o *overlay) ipHolder(ip string) string {
	if o == nil {
		return ""
	}
	return o.ips[ip]
}
