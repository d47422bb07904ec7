package droverv1

import (
	"fmt"
	"net"
	"strconv"
)

// Validate checks a join: the joining server must name its raft id, both
// addresses and its build version.
func (r *JoinRequest) Validate() error {
	var v violations
	m := r.GetServer()
	if m == nil {
		v.add("server", "is required")
		return v.err()
	}
	v.text("server.id", m.GetId(), maxNameLen, true)
	v.hostPort("server.rpc_addr", m.GetRpcAddr())
	v.hostPort("server.raft_addr", m.GetRaftAddr())
	v.text("server.version", m.GetVersion(), maxNameLen, true)
	return v.err()
}

// Validate checks that exactly one of id and address names the peer.
func (r *RaftRemovePeerRequest) Validate() error {
	var v violations
	switch {
	case r.GetId() == "" && r.GetAddress() == "":
		v.add("id", "one of id and address is required")
	case r.GetId() != "" && r.GetAddress() != "":
		v.add("address", "give either id or address, not both")
	case r.GetAddress() != "":
		v.hostPort("address", r.GetAddress())
	default:
		v.text("id", r.GetId(), maxNameLen, true)
	}
	return v.err()
}

// hostPort checks a host:port address with a non-zero port.
func (v *violations) hostPort(field, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(field, "%q is not host:port: %v", addr, err)
		return
	}
	if host == "" {
		v.add(field, "%q has no host", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > maxPortNumber {
		v.add(field, "%q has no valid port", addr)
	}
}

// MaxForwardedReports bounds the agents' calls one ForwardAllocReports
// carries.
const MaxForwardedReports = 4096

// Validate checks the batch's shape. Each call in it is checked as
// UpdateAlloc checks it, and answered on its own.
func (r *ForwardAllocReportsRequest) Validate() error {
	var v violations
	reports := r.GetReports()
	switch {
	case len(reports) == 0:
		v.add("reports", "must carry at least one call")
	case len(reports) > MaxForwardedReports:
		v.add("reports", "must carry at most %d calls", MaxForwardedReports)
	}
	for i, rep := range reports {
		if rep.GetRequest() == nil {
			v.add(fmt.Sprintf("reports[%d].request", i), "is required")
		}
		v.nonNegative(fmt.Sprintf("reports[%d].deadline", i), rep.GetDeadline())
	}
	return v.err()
}
