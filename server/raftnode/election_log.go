package raftnode

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// raft's messages about elections, as hashicorp/raft v1.7 words them.
const (
	msgHeartbeatTimeout = "heartbeat timeout reached, starting election"
	msgElectionTimeout  = "Election timeout reached, restarting election"
	msgNoKnownPeers     = "no known peers, aborting election"
	msgEnteringLeader   = "entering leader state"
)

// electionLevels picks the level of raft's election warnings. raft warns
// whenever it starts an election, as it should when a server stops
// hearing from its leader; but a server that has not known a leader since
// it started (every start, and every cluster being formed) must elect one,
// and a WARN there (the first line `make run` printed) teaches operators
// to ignore the warning. Until raft names a leader these messages are
// logged at INFO; from then on at raft's WARN.
type electionLevels struct {
	// leaderKnown is set by the first record naming a leader and shared
	// by every logger derived from one NewHCLogger.
	leaderKnown atomic.Bool
}

// level is the level to log msg at, raft having chosen l.
func (e *electionLevels) level(l hclog.Level, msg string, args []any) hclog.Level {
	if namesLeader(msg, args) {
		e.leaderKnown.Store(true)
	}
	if l != hclog.Warn || e.leaderKnown.Load() {
		return l
	}
	switch msg {
	case msgHeartbeatTimeout, msgElectionTimeout, msgNoKnownPeers:
		return hclog.Info
	}
	return l
}

// namesLeader reports whether a record shows that a leader is or was
// known: this server took the lead, or a record carries a leader's id
// (raft's "leader-id" when entering the follower state, "last-leader-id"
// when its heartbeat timed out).
func namesLeader(msg string, args []any) bool {
	if msg == msgEnteringLeader {
		return true
	}
	for i := 0; i+1 < len(args); i += 2 {
		if key, ok := args[i].(string); ok && (key == "leader-id" || key == "last-leader-id") && fmt.Sprint(args[i+1]) != "" {
			return true
		}
	}
	return false
}
