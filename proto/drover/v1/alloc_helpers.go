package droverv1

import "math"

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

// ClientDescriptionUnknown explains an allocation whose node disconnected.
const ClientDescriptionUnknown = "alloc is unknown since its node is disconnected"

// MarkUnknown records on a copy of an allocation that its node is
// disconnected: client status unknown, with an AllocState entry at now, so
// that the reconnect can be recognised later (DESIGN 6).
func (a *Allocation) MarkUnknown(now int64) {
	a.ClientStatus = AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
	a.ClientDescription = ClientDescriptionUnknown
	a.AllocStates = append(a.AllocStates, &AllocState{
		Field:        AllocStateField_ALLOC_STATE_FIELD_CLIENT_STATUS,
		ClientStatus: AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN,
		Time:         now,
	})
}

// Disconnectable reports whether the allocation may outlive a disconnect
// of its node as unknown rather than lost: it is wanted running, its agent
// reported it running, and its group (in job, the version it runs) sets
// max_client_disconnect.
func (a *Allocation) Disconnectable(job *Job) bool {
	if a.Terminal() || a.GetClientStatus() != AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING {
		return false
	}
	return job.LookupTaskGroup(a.GetTaskGroup()).GetMaxClientDisconnect().AsDuration() > 0
}

// UnknownSince returns when the allocation last became unknown: the time
// of the oldest entry in the trailing run of client-status entries that
// say unknown, or 0 if its last client-status entry says otherwise.
func (a *Allocation) UnknownSince() int64 {
	var since int64
	states := a.GetAllocStates()
	for i := len(states) - 1; i >= 0; i-- {
		s := states[i]
		if s.GetField() != AllocStateField_ALLOC_STATE_FIELD_CLIENT_STATUS ||
			s.GetClientStatus() == AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED {
			continue
		}
		if s.GetClientStatus() != AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN {
			break
		}
		since = s.GetTime()
	}
	return since
}

// DisconnectDeadline returns when the allocation, unknown since its node
// disconnected, becomes lost under its group's max_client_disconnect
// window: window after UnknownSince, saturating at math.MaxInt64 rather
// than wrapping for huge windows. With UnknownSince 0 (no unknown entry
// recorded yet, as for an allocation just being marked) the window starts
// at now, so the deadline lies ahead and the allocation is not lost yet.
func (a *Allocation) DisconnectDeadline(window, now int64) int64 {
	since := a.UnknownSince()
	if since == 0 {
		since = now
	}
	if window > 0 && since > math.MaxInt64-window {
		return math.MaxInt64
	}
	return since + window
}
