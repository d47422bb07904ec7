package droverv1

// IsClientTerminal reports whether an allocation with client status s no
// longer runs on its node (complete, failed or lost). Unknown is not
// terminal: the allocation may still be running on a disconnected node.
func (s AllocClientStatus) IsClientTerminal() bool {
	switch s {
	case AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE,
		AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED,
		AllocClientStatus_ALLOC_CLIENT_STATUS_LOST:
		return true
	}
	return false
}

// IsAgentReportable reports whether an agent may report s in
// Node.UpdateAlloc; lost and unknown are decided by the servers.
func (s AllocClientStatus) IsAgentReportable() bool {
	switch s {
	case AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING,
		AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING,
		AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE,
		AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED:
		return true
	}
	return false
}

// ClientTerminal reports whether the allocation has stopped on its node.
// Only then are its resources free for other allocations.
func (a *Allocation) ClientTerminal() bool {
	return a.GetClientStatus().IsClientTerminal()
}

// ServerTerminal reports whether the servers want the allocation stopped.
func (a *Allocation) ServerTerminal() bool {
	switch a.GetDesiredStatus() {
	case AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, AllocDesiredStatus_ALLOC_DESIRED_STATUS_EVICT:
		return true
	}
	return false
}

// Terminal reports whether the allocation is stopped or wanted stopped.
func (a *Allocation) Terminal() bool {
	return a.ServerTerminal() || a.ClientTerminal()
}
