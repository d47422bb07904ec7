package raftnode

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestElectionLevels feeds raft's messages, in the order raft logs them,
// through one logger and checks the level of each.
func TestElectionLevels(t *testing.T) {
	type line struct {
		level hclog.Level
		msg   string
		args  []any
	}
	heartbeat := func(leader raft.ServerID) line {
		return line{hclog.Warn, msgHeartbeatTimeout, []any{"last-leader-addr", raft.ServerAddress(""), "last-leader-id", leader}}
	}
	follower := func(leader raft.ServerID) line {
		return line{hclog.Info, "entering follower state", []any{"follower", "node", "leader-address", raft.ServerAddress(""), "leader-id", leader}}
	}
	electionTimeout := line{hclog.Warn, msgElectionTimeout, nil}
	noPeers := line{hclog.Warn, msgNoKnownPeers, nil}
	leader := line{hclog.Info, msgEnteringLeader, []any{"leader", "node"}}
	other := line{hclog.Warn, "failed to contact", []any{"server-id", "s2"}}
	tests := []struct {
		name  string
		lines []line
		want  []string // the levels, in order
	}{
		{"a single server's start", []line{follower(""), heartbeat(""), leader}, []string{"INFO", "INFO", "INFO"}},
		{"a cluster being formed, a split vote", []line{follower(""), heartbeat(""), electionTimeout, follower("s1")}, []string{"INFO", "INFO", "INFO", "INFO"}},
		{"a server waiting to be joined", []line{follower(""), noPeers}, []string{"INFO", "INFO"}},
		{"the leader lost", []line{follower(""), heartbeat(""), follower("s1"), heartbeat("s1"), electionTimeout}, []string{"INFO", "INFO", "INFO", "WARN", "WARN"}},
		{"the leader lost, known only from the timeout", []line{heartbeat("s1")}, []string{"WARN"}},
		{"a second timeout after a leader was known", []line{leader, heartbeat(""), noPeers}, []string{"INFO", "WARN", "WARN"}},
		{"other warnings stay warnings", []line{other}, []string{"WARN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sl, records := newRecorder(slog.LevelDebug)
			l := NewHCLogger(sl, "raft")
			for i, ln := range tt.lines {
				// Alternate between related loggers: the state is shared.
				if i%2 == 1 {
					l.Named("child").Log(ln.level, ln.msg, ln.args...)
					continue
				}
				l.Log(ln.level, ln.msg, ln.args...)
			}
			var got []string
			for _, r := range records() {
				got = append(got, r.level.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("levels %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStartQuietly starts a real single-server node, as `make run` does,
// with its logger at WARN: the start-up election is not a warning.
func TestStartQuietly(t *testing.T) {
	t.Parallel()
	sl, records := newRecorder(slog.LevelInfo)
	cfg := testConfig(t, t.TempDir(), &testFSM{})
	cfg.Logger = sl
	n := startNode(t, cfg)
	waitLeader(t, n)
	var warnings, elections []string
	for _, r := range records() {
		if r.level >= slog.LevelWarn {
			warnings = append(warnings, fmt.Sprintf("%s %s %v", r.level, r.msg, r.attrs))
		}
		if r.msg == msgHeartbeatTimeout {
			elections = append(elections, r.level.String())
		}
	}
	if len(warnings) > 0 {
		t.Errorf("starting a single server logged warnings:\n%q", warnings)
	}
	if !slices.Equal(elections, []string{"INFO"}) {
		t.Errorf("the start-up election was logged at %q, want once at INFO", elections)
	}
}
