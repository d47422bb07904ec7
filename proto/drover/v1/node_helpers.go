package droverv1

// IsUnresponsive reports whether a node in status s has missed its
// heartbeats (down or disconnected). Such a node must heartbeat before its
// allocation reports are accepted.
func (s NodeStatus) IsUnresponsive() bool {
	return s == NodeStatus_NODE_STATUS_DOWN || s == NodeStatus_NODE_STATUS_DISCONNECTED
}

// Sanitized returns the node without its secret, for read APIs and events.
// The stored node is immutable, so a node that has a secret is copied.
func (n *Node) Sanitized() *Node {
	if n == nil || n.SecretId == "" {
		return n
	}
	c := n.CloneVT()
	c.SecretId = ""
	return c
}

// DescriptionEqual reports whether two nodes have the same agent-provided
// description (everything Node.Register may change). Registering an
// unchanged description writes nothing.
func (n *Node) DescriptionEqual(other *Node) bool {
	a, b := n.CloneVT(), other.CloneVT()
	a.ClearServerFields()
	b.ClearServerFields()
	return a.EqualVT(b)
}

// ClearServerFields resets the fields the servers own, so that values sent
// by an agent are never stored.
func (n *Node) ClearServerFields() {
	n.Status = NodeStatus_NODE_STATUS_UNSPECIFIED
	n.StatusDescription = ""
	n.StatusUpdatedAt = 0
	n.SchedulingEligibility = SchedulingEligibility_SCHEDULING_ELIGIBILITY_UNSPECIFIED
	n.DrainStrategy = nil
	n.Events = nil
	n.LastMissedHeartbeatIndex = 0
	n.LastAllocUpdateIndex = 0
	n.CreateIndex = 0
	n.ModifyIndex = 0
}
