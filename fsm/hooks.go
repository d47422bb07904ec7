package fsm

import (
	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Hooks receives the side effects of applied entries that the leader acts
// on: evaluations to hand to the eval broker or the blocked set, and
// capacity that may unblock evaluations. Every server calls them as it
// applies the log; the implementation does nothing unless its server leads
// (the broker and blocked set are disabled elsewhere). Hooks are called
// from the FSM's goroutine after the write is visible and must not block.
type Hooks interface {
	// EvalsWritten is called with every evaluation an entry created or
	// updated, in entry order.
	EvalsWritten(index uint64, evals []*droverv1.Evaluation)
	// CapacityChanged is called when nodes of the given computed classes
	// may offer new capacity: a node was written ready and eligible, or an
	// allocation on it became client-terminal and released its resources.
	CapacityChanged(index uint64, classes []string)
}

// notifyHooks tells the hooks what an entry's changes imply.
func (f *FSM) notifyHooks(index uint64, changes []state.Change) {
	if f.hooks == nil {
		return
	}
	var (
		evals   []*droverv1.Evaluation
		classes map[string]struct{}
		snap    *state.Snapshot
	)
	addClass := func(n *droverv1.Node) {
		if n == nil {
			return
		}
		if classes == nil {
			classes = make(map[string]struct{})
		}
		classes[n.ComputedClass()] = struct{}{}
	}
	for _, c := range changes {
		if c.Deleted {
			continue
		}
		switch obj := c.Object.(type) {
		case *droverv1.Evaluation:
			evals = append(evals, obj)
		case *droverv1.Node:
			if schedulable(obj) {
				addClass(obj)
			}
		case *droverv1.Allocation:
			if !obj.ClientTerminal() {
				continue
			}
			if snap == nil {
				snap = f.state.Snapshot()
			}
			if n := snap.NodeByID(obj.GetNodeId()); schedulable(n) {
				addClass(n)
			}
		}
	}
	if len(evals) > 0 {
		f.hooks.EvalsWritten(index, evals)
	}
	if len(classes) > 0 {
		list := make([]string, 0, len(classes))
		for c := range classes {
			list = append(list, c)
		}
		f.hooks.CapacityChanged(index, list)
	}
}

// schedulable reports whether new work may be placed on the node.
func schedulable(n *droverv1.Node) bool {
	return n != nil && n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_READY &&
		n.GetSchedulingEligibility() != droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE &&
		n.GetDrainStrategy() == nil
}
