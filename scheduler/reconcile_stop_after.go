package scheduler

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// stop_after_client_disconnect (DESIGN 6): the agent of a node that lost
// contact with the servers stops the group's allocations on its own once
// that long has passed since its last heartbeat. Until then a lost
// allocation may still be running, so its replacement waits: the
// allocation is stopped as lost with a delayed evaluation recorded on it,
// keeps its place in the group, and is replaced when that evaluation runs.

// classifyLost sorts a lost allocation that is not yet stopped: replaced
// now, or once its agent has stopped it.
func (g *groupReconciler) classifyLost(a *droverv1.Allocation) {
	at, wait := g.clientStopAt(a)
	if !wait {
		g.lost = append(g.lost, a)
		return
	}
	g.awaitingStop = append(g.awaitingStop, a)
	stamp := &droverv1.Allocation{}
	g.later.add(droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP, at, stamp)
	g.ch.stopAwaitingClient(a, stamp)
}

// classifyStoppedLost handles an allocation stopped as lost while its
// agent might still run it: it keeps its place until its follow-up runs,
// and is replaced then.
func (g *groupReconciler) classifyStoppedLost(a *droverv1.Allocation) {
	if a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST ||
		a.GetFollowupEvalId() == "" || g.group.GetStopAfterClientDisconnect().AsDuration() <= 0 || g.links.replaced(a) {
		return
	}
	at, wait := g.clientStopAt(a)
	if !wait {
		g.stoppedLost = append(g.stoppedLost, a)
		return
	}
	g.awaitingStop = append(g.awaitingStop, a)
	if g.followupPending(a.GetFollowupEvalId()) {
		return
	}
	// Its follow-up was canceled: schedule another, recorded on the
	// allocation where the plan applier takes that record. An
	// initializing or disconnected node would refuse its whole node plan
	// for it, and a collected one has none; unrecorded, a later
	// evaluation before the time schedules yet another, and any
	// evaluation after it replaces the allocation.
	var stamp *droverv1.Allocation
	if stoppedLostStampable(g.in.nodes[a.GetNodeId()]) {
		stamp = g.ch.copyOf(a)
	}
	g.later.add(droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP, at, stamp)
}

// stoppedLostStampable reports whether the plan applier accepts an update
// of an allocation stopped as lost on the node: a ready node takes any
// update, a down one only records of lost or unknown allocations, which
// a stopped lost allocation's copy is.
func stoppedLostStampable(n *droverv1.Node) bool {
	return n != nil && (nodeReady(n) || n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_DOWN)
}

// clientStopAt returns when the agent of a lost allocation will have
// stopped it on its own, and whether the replacement must wait until then:
// the group sets stop_after_client_disconnect, the time has not come, and
// the evaluation being processed is not the follow-up made for it.
func (g *groupReconciler) clientStopAt(a *droverv1.Allocation) (int64, bool) {
	after := int64(g.group.GetStopAfterClientDisconnect().AsDuration())
	if after <= 0 || (a.GetFollowupEvalId() != "" && a.GetFollowupEvalId() == g.in.evalID) {
		return 0, false
	}
	at := satAdd(lostSince(a, g.in.nodes[a.GetNodeId()], g.in.now), after)
	return at, at > g.in.now
}

// lostSince is when an allocation was lost: when its node went down, else
// when the servers recorded it lost, else now. The agent's own clock
// started at its last heartbeat, which was earlier still, so waiting from
// here never replaces an allocation its agent may still run.
func lostSince(a *droverv1.Allocation, node *droverv1.Node, now int64) int64 {
	if node.GetStatus() == droverv1.NodeStatus_NODE_STATUS_DOWN && node.GetStatusUpdatedAt() > 0 {
		return node.GetStatusUpdatedAt()
	}
	for s := range clientStatusesNewestFirst(a) {
		if s.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST {
			return s.GetTime()
		}
		break
	}
	return now
}
