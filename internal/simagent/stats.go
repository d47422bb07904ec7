package simagent

import (
	"sync/atomic"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Stats are a fleet's counters since Start, and the statuses its agents hold
// now.
type Stats struct {
	Registrations    uint64 // Register calls answered
	RegisterFailures uint64
	HeartbeatsSent   uint64 // UpdateStatus calls made
	HeartbeatsOK     uint64
	HeartbeatsFailed uint64
	// ReportCalls counts UpdateAlloc calls answered, AllocReports the
	// allocation changes they carried.
	ReportCalls    uint64
	AllocReports   uint64
	ReportFailures uint64
	// ReportsRefused counts UpdateAlloc calls refused because the node was
	// down or disconnected (each followed by a heartbeat).
	ReportsRefused uint64
	Polls          uint64 // GetAllocs calls answered
	PollFailures   uint64
	// Failovers counts moves of an agent to the next server.
	Failovers uint64
	// Disconnects counts flaky agents going silent, Returns their coming
	// back (Config.Faults).
	Disconnects uint64
	Returns     uint64
	// UpdateAllocLatency is the duration of answered UpdateAlloc calls;
	// GetAllocsLatency the delay from the servers' write of an allocation
	// change to its receipt by the agent (see Latency). Both are copies,
	// never nil in a Stats from Fleet.Stats.
	UpdateAllocLatency *Latency
	GetAllocsLatency   *Latency
	// NodeStatuses counts agents by the status the servers last told them
	// (UNSPECIFIED: not registered yet).
	NodeStatuses map[droverv1.NodeStatus]int
	// AllocStatuses counts the allocations the agents track, by what they
	// do on the simulated node; finished ones count until the servers
	// collect them.
	AllocStatuses map[droverv1.AllocClientStatus]int
	// LastFailure is the error of the most recent failed Register,
	// UpdateStatus or UpdateAlloc call, nil while none failed; a fleet's
	// runner reads it to tell an operator why calls fail.
	LastFailure error
}

// counters are the fleet's live counters.
type counters struct {
	registrations, registerFailures                atomic.Uint64
	heartbeatsSent, heartbeatsOK, heartbeatsFailed atomic.Uint64
	reportCalls, allocReports, reportFailures      atomic.Uint64
	reportsRefused                                 atomic.Uint64
	polls, pollFailures                            atomic.Uint64
	failovers                                      atomic.Uint64
	disconnects, returns                           atomic.Uint64
	updateAllocLatency, getAllocsLatency           Latency
	lastFailure                                    atomic.Pointer[callFailure]
}

// callFailure boxes an error for atomic.Pointer.
type callFailure struct{ err error }

// failed records err as the most recent failed call.
func (c *counters) failed(err error) { c.lastFailure.Store(&callFailure{err: err}) }

// snapshot copies the counters into a Stats.
func (c *counters) snapshot() Stats {
	return Stats{
		Registrations:    c.registrations.Load(),
		RegisterFailures: c.registerFailures.Load(),
		HeartbeatsSent:   c.heartbeatsSent.Load(),
		HeartbeatsOK:     c.heartbeatsOK.Load(),
		HeartbeatsFailed: c.heartbeatsFailed.Load(),
		ReportCalls:      c.reportCalls.Load(),
		AllocReports:     c.allocReports.Load(),
		ReportFailures:   c.reportFailures.Load(),
		ReportsRefused:   c.reportsRefused.Load(),
		Polls:            c.polls.Load(),
		PollFailures:     c.pollFailures.Load(),
		Failovers:        c.failovers.Load(),
		Disconnects:      c.disconnects.Load(),
		Returns:          c.returns.Load(),

		UpdateAllocLatency: c.updateAllocLatency.Snapshot(),
		GetAllocsLatency:   c.getAllocsLatency.Snapshot(),
		NodeStatuses:       make(map[droverv1.NodeStatus]int),
		AllocStatuses:      make(map[droverv1.AllocClientStatus]int),
		LastFailure:        c.lastFailureErr(),
	}
}

// lastFailureErr is the most recent failed call's error, or nil.
func (c *counters) lastFailureErr() error {
	if f := c.lastFailure.Load(); f != nil {
		return f.err
	}
	return nil
}
