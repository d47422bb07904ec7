package rpc

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"
)

// Limits bound what callers may hold of a server, so that overload is
// refused at once instead of queued until it starves raft and heartbeats.
// DefaultLimits gives the defaults in parentheses.
type Limits struct {
	// MaxConnsPerIP bounds the connections open from one remote address;
	// one beyond it is closed as soon as it is accepted (4096: a few
	// thousand agents behind one NAT address).
	MaxConnsPerIP int
	// MaxStreamsPerConn bounds the calls in flight on one connection
	// (HTTP/2 concurrent streams); a client queues calls beyond it. Every
	// agent in a blocking GetAllocs holds one, and a simulated fleet puts
	// 2,000 agents on one connection (4096).
	MaxStreamsPerConn int
	// KeepaliveMinTime is the shortest interval at which a client may
	// send keepalive pings; one that pings more often is disconnected
	// (10s). It may not exceed ClientKeepaliveTime, or drover's own
	// clients would be disconnected.
	KeepaliveMinTime time.Duration
	// KeepalivePermitWithoutStream allows keepalive pings on connections
	// with no call in flight, as agents between heartbeats send them
	// (true). False disconnects such clients.
	KeepalivePermitWithoutStream bool
	// MaxAgentCalls bounds agents' unary calls in flight: Register,
	// UpdateStatus, UpdateAlloc and GetAllocs (8192). Most of them wait
	// (for a raft batch, for the leader) rather than compute.
	MaxAgentCalls int
	// MaxListCalls bounds operators' whole-table reads in flight: the
	// List calls of every service, JobService.Allocations and Evaluations,
	// OperatorService.StateDigest (GOMAXPROCS). Each serialises or hashes
	// a table; one per core leaves raft and heartbeats a short run queue
	// (and makes more answers per second under a flood than two per core
	// did: BenchmarkOperatorFlood).
	MaxListCalls int
	// MaxOperatorCalls bounds operators' other unary calls in flight:
	// reads of one object and writes, which cost little each (256).
	MaxOperatorCalls int
}

// ClientKeepaliveTime is how often drover's own clients that ping (the
// simulated agents, servers forwarding to the leader) ping an idle
// connection; KeepaliveMinTime must not exceed it.
const ClientKeepaliveTime = 30 * time.Second

// DefaultLimits returns the limits a server has unless configured.
func DefaultLimits() Limits {
	return Limits{
		MaxConnsPerIP:                4096,
		MaxStreamsPerConn:            4096,
		KeepaliveMinTime:             10 * time.Second,
		KeepalivePermitWithoutStream: true,
		MaxAgentCalls:                8192,
		MaxListCalls:                 runtime.GOMAXPROCS(0),
		MaxOperatorCalls:             256,
	}
}

// Validate reports every limit that makes no sense.
func (l Limits) Validate() error {
	var errs []error
	atLeastOne := func(name string, v int) {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s %d: must be at least 1", name, v))
		}
	}
	atLeastOne("max connections per IP", l.MaxConnsPerIP)
	atLeastOne("max streams per connection", l.MaxStreamsPerConn)
	atLeastOne("max agent calls", l.MaxAgentCalls)
	atLeastOne("max list calls", l.MaxListCalls)
	atLeastOne("max operator calls", l.MaxOperatorCalls)
	if l.MaxStreamsPerConn > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("max streams per connection %d: must be at most %d", l.MaxStreamsPerConn, uint32(math.MaxUint32)))
	}
	switch {
	case l.KeepaliveMinTime <= 0:
		// gRPC would take zero for its own default of 5 minutes, which
		// disconnects every drover client.
		errs = append(errs, fmt.Errorf("keepalive min time %s: must be above 0", l.KeepaliveMinTime))
	case l.KeepaliveMinTime > ClientKeepaliveTime:
		errs = append(errs, fmt.Errorf("keepalive min time %s: must be at most %s, the interval at which drover's own clients ping",
			l.KeepaliveMinTime, ClientKeepaliveTime))
	}
	return errors.Join(errs...)
}

// withDefaults fills in zero numbers; KeepalivePermitWithoutStream is
// taken as given.
func (l Limits) withDefaults() Limits {
	def := DefaultLimits()
	l.MaxConnsPerIP = orDefault(l.MaxConnsPerIP, def.MaxConnsPerIP)
	l.MaxStreamsPerConn = orDefault(l.MaxStreamsPerConn, def.MaxStreamsPerConn)
	l.KeepaliveMinTime = orDefault(l.KeepaliveMinTime, def.KeepaliveMinTime)
	l.MaxAgentCalls = orDefault(l.MaxAgentCalls, def.MaxAgentCalls)
	l.MaxListCalls = orDefault(l.MaxListCalls, def.MaxListCalls)
	l.MaxOperatorCalls = orDefault(l.MaxOperatorCalls, def.MaxOperatorCalls)
	return l
}

// LimitStats are what the limits hold and refused since the server
// started.
type LimitStats struct {
	// AgentCalls, ListCalls and OperatorCalls are the calls of each class
	// in flight now (holding a slot).
	AgentCalls, ListCalls, OperatorCalls int64
	// RefusedAgentCalls, RefusedListCalls and RefusedOperatorCalls count
	// calls refused RESOURCE_EXHAUSTED.
	RefusedAgentCalls, RefusedListCalls, RefusedOperatorCalls uint64
	// Connections are the connections open now; RefusedConnections counts
	// those closed at accept for their address's limit.
	Connections        int64
	RefusedConnections uint64
}

// LimitStats reports what the limits hold and have refused.
func (s *Server) LimitStats() LimitStats {
	return LimitStats{
		AgentCalls:           s.admit.agent.inFlight.Load(),
		ListCalls:            s.admit.list.inFlight.Load(),
		OperatorCalls:        s.admit.operator.inFlight.Load(),
		RefusedAgentCalls:    s.admit.agent.refused.Load(),
		RefusedListCalls:     s.admit.list.refused.Load(),
		RefusedOperatorCalls: s.admit.operator.refused.Load(),
		Connections:          s.conns.open.Load(),
		RefusedConnections:   s.conns.refused.Load(),
	}
}
