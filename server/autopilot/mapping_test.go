package autopilot

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftautopilot "github.com/hashicorp/raft-autopilot"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestNodeStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	dead := 5 * time.Minute
	tests := []struct {
		name         string
		failingSince time.Time
		want         raftautopilot.NodeStatus
	}{
		{"answering", time.Time{}, raftautopilot.NodeAlive},
		{"failing briefly", now.Add(-time.Second), raftautopilot.NodeAlive},
		{"failing just under the threshold", now.Add(-dead + time.Nanosecond), raftautopilot.NodeAlive},
		{"failing exactly the threshold", now.Add(-dead), raftautopilot.NodeFailed},
		{"failing for long", now.Add(-time.Hour), raftautopilot.NodeFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nodeStatus(now, tt.failingSince, dead); got != tt.want {
				t.Errorf("nodeStatus = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestKnownServers(t *testing.T) {
	now := time.Unix(1000, 0)
	config := []raft.Server{
		{Suffrage: raft.Voter, ID: "a", Address: "ra"},
		{Suffrage: raft.Voter, ID: "b", Address: "rb"},
		{Suffrage: raft.Nonvoter, ID: "c", Address: "rc"},
		{Suffrage: raft.Voter, ID: "d", Address: "rd"},
	}
	records := map[string]*droverv1.ServerMember{
		"a": {Id: "a", RpcAddr: "ga", RaftAddr: "ra", Version: "0.1.0"},
		"b": {Id: "b", RpcAddr: "gb", RaftAddr: "rb", Version: "0.1.0"},
		"c": {Id: "c", RpcAddr: "gc", RaftAddr: "rc", Version: "0.1.0"},
		// Recorded but no longer in raft: must not be listed (it would be
		// probed for nothing).
		"gone": {Id: "gone", RpcAddr: "gg", RaftAddr: "rg", Version: "0.1.0"},
	}
	probes := map[raft.ServerID]*probe{
		"b": {info: &droverv1.ServerInfoResponse{Server: &droverv1.ServerMember{Id: "b", Version: "0.2.0"}},
			failingSince: now.Add(-time.Minute)},
		"c": {failingSince: now.Add(-time.Hour), err: errors.New("down")},
	}
	got := knownServers(knownInputs{
		now: now, config: config, records: records, probes: probes,
		localID: "a", isLeader: true, version: "0.3.0", deadAfter: 5 * time.Minute,
	})

	type want struct {
		addr     raft.ServerAddress
		status   raftautopilot.NodeStatus
		version  string
		rpcAddr  string
		isLeader bool
	}
	wants := map[raft.ServerID]want{
		// Local: alive by definition, its own binary's version.
		"a": {"ra", raftautopilot.NodeAlive, "0.3.0", "ga", true},
		// Answered before with a newer version, failing for less than the
		// threshold: alive, version from the answer.
		"b": {"rb", raftautopilot.NodeAlive, "0.2.0", "gb", false},
		// Failing for longer than the threshold.
		"c": {"rc", raftautopilot.NodeFailed, "0.1.0", "gc", false},
		// In raft without a record: still known, or the library would
		// remove it as stale.
		"d": {"rd", raftautopilot.NodeAlive, "", "", false},
	}
	if len(got) != len(wants) {
		t.Fatalf("got %d servers, want %d: %v", len(got), len(wants), got)
	}
	for id, w := range wants {
		s := got[id]
		if s == nil {
			t.Fatalf("server %s missing", id)
		}
		if s.ID != id || s.Address != w.addr || s.NodeStatus != w.status || s.Version != w.version ||
			s.Meta[metaRPCAddr] != w.rpcAddr || s.IsLeader != w.isLeader {
			t.Errorf("server %s = %+v, want %+v", id, *s, w)
		}
		// Without NodeVoter the library never removes a failed voter.
		if s.NodeType != raftautopilot.NodeVoter {
			t.Errorf("server %s NodeType = %q, want %q", id, s.NodeType, raftautopilot.NodeVoter)
		}
	}
}

func TestStatsFromInfo(t *testing.T) {
	tests := []struct {
		name string
		resp *droverv1.ServerInfoResponse
		want raftautopilot.ServerStats
	}{
		{"follower",
			&droverv1.ServerInfoResponse{RaftState: droverv1.RaftState_RAFT_STATE_FOLLOWER, LastIndex: 10, LastTerm: 2, LastContact: durationpb.New(30 * time.Millisecond)},
			raftautopilot.ServerStats{LastIndex: 10, LastTerm: 2, LastContact: 30 * time.Millisecond}},
		{"never heard from a leader",
			&droverv1.ServerInfoResponse{RaftState: droverv1.RaftState_RAFT_STATE_FOLLOWER, LastIndex: 1, LastTerm: 1, LastContactNs: -1},
			raftautopilot.ServerStats{LastIndex: 1, LastTerm: 1, LastContact: noContact}},
		{"shutting down",
			&droverv1.ServerInfoResponse{RaftState: droverv1.RaftState_RAFT_STATE_SHUTDOWN, LastIndex: 10, LastTerm: 2},
			raftautopilot.ServerStats{LastIndex: 10, LastTerm: 2, LastContact: noContact}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statsFromInfo(tt.resp); got != tt.want {
				t.Errorf("statsFromInfo = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestLastTerm covers a server whose log is empty behind a snapshot, as
// one that has just installed the leader's snapshot: its last entry is the
// snapshot's, not term 0.
func TestLastTerm(t *testing.T) {
	tests := []struct {
		name  string
		stats map[string]string
		want  uint64
	}{
		{"log newer than snapshot", map[string]string{"last_log_index": "300", "last_log_term": "4", "last_snapshot_index": "252", "last_snapshot_term": "2"}, 4},
		{"log ends at the snapshot", map[string]string{"last_log_index": "252", "last_log_term": "2", "last_snapshot_index": "252", "last_snapshot_term": "2"}, 2},
		{"empty log behind an installed snapshot", map[string]string{"last_log_index": "0", "last_log_term": "0", "last_snapshot_index": "252", "last_snapshot_term": "2"}, 2},
		{"fresh server", map[string]string{"last_log_index": "0", "last_log_term": "0", "last_snapshot_index": "0", "last_snapshot_term": "0"}, 0},
		{"missing keys", map[string]string{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LastTerm(tt.stats); got != tt.want {
				t.Errorf("LastTerm = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestLocalStats(t *testing.T) {
	tests := []struct {
		name  string
		stats map[string]string
		want  raftautopilot.ServerStats
	}{
		{"leader", map[string]string{"last_log_term": "3", "last_contact": "0"},
			raftautopilot.ServerStats{LastIndex: 42, LastTerm: 3, LastContact: 0}},
		{"follower", map[string]string{"last_log_term": "3", "last_contact": "12.5ms"},
			raftautopilot.ServerStats{LastIndex: 42, LastTerm: 3, LastContact: 12500 * time.Microsecond}},
		{"never", map[string]string{"last_log_term": "0", "last_contact": "never"},
			raftautopilot.ServerStats{LastIndex: 42, LastTerm: 0, LastContact: noContact}},
		{"missing keys", map[string]string{},
			raftautopilot.ServerStats{LastIndex: 42, LastContact: noContact}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := localStats(tt.stats, 42); got != tt.want {
				t.Errorf("localStats = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRaftStateOf(t *testing.T) {
	tests := []struct {
		in   raft.RaftState
		want droverv1.RaftState
	}{
		{raft.Follower, droverv1.RaftState_RAFT_STATE_FOLLOWER},
		{raft.Candidate, droverv1.RaftState_RAFT_STATE_CANDIDATE},
		{raft.Leader, droverv1.RaftState_RAFT_STATE_LEADER},
		{raft.Shutdown, droverv1.RaftState_RAFT_STATE_SHUTDOWN},
		{raft.RaftState(99), droverv1.RaftState_RAFT_STATE_UNSPECIFIED},
	}
	for _, tt := range tests {
		if got := RaftState(tt.in); got != tt.want {
			t.Errorf("RaftState(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestUnhealthyReason(t *testing.T) {
	conf := &raftautopilot.Config{LastContactThreshold: 200 * time.Millisecond, MaxTrailingLogs: 250}
	leader := &raftautopilot.ServerState{Stats: raftautopilot.ServerStats{LastTerm: 5, LastIndex: 1000}}
	mk := func(status raftautopilot.NodeStatus, contact time.Duration, term, index uint64) *raftautopilot.ServerState {
		return &raftautopilot.ServerState{
			Server: raftautopilot.Server{NodeStatus: status},
			Stats:  raftautopilot.ServerStats{LastContact: contact, LastTerm: term, LastIndex: index},
		}
	}
	healthy := mk(raftautopilot.NodeAlive, 0, 5, 1000)
	healthy.Health.Healthy = true
	tests := []struct {
		name   string
		ss     *raftautopilot.ServerState
		leader *raftautopilot.ServerState
		want   string
	}{
		{"healthy", healthy, leader, ""},
		{"not measured", nil, leader, "not measured yet"},
		{"failed", mk(raftautopilot.NodeFailed, 0, 5, 1000), leader, "failed: unreachable for longer than the dead server threshold"},
		{"left", mk(raftautopilot.NodeLeft, 0, 5, 1000), leader, "node status left"},
		{"no leader", mk(raftautopilot.NodeAlive, 0, 5, 1000), nil, "no leader"},
		{"no contact", mk(raftautopilot.NodeAlive, noContact, 5, 1000), leader, "no contact with the leader"},
		{"stale contact", mk(raftautopilot.NodeAlive, time.Second, 5, 1000), leader, "last contact with the leader 1s ago exceeds 200ms"},
		{"other term", mk(raftautopilot.NodeAlive, 0, 4, 1000), leader, "on term 4, the leader on 5"},
		{"behind", mk(raftautopilot.NodeAlive, 0, 5, 700), leader, "300 entries behind the leader (more than 250)"},
		{"stats moved on", mk(raftautopilot.NodeAlive, 0, 5, 1000), leader, "unhealthy at the last check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unhealthyReason(tt.ss, tt.leader, conf); got != tt.want {
				t.Errorf("unhealthyReason = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBuildMembers(t *testing.T) {
	conf := &raftautopilot.Config{LastContactThreshold: 200 * time.Millisecond, MaxTrailingLogs: 250}
	stable := time.Unix(100, 0)
	config := []raft.Server{
		{Suffrage: raft.Nonvoter, ID: "d", Address: "rd"},
		{Suffrage: raft.Voter, ID: "c", Address: "rc"},
		{Suffrage: raft.Voter, ID: "b", Address: "rb"},
		{Suffrage: raft.Voter, ID: "a", Address: "ra"},
	}
	records := map[string]*droverv1.ServerMember{
		"a": {Id: "a", RpcAddr: "ga", Version: "0.1.0"},
		"b": {Id: "b", RpcAddr: "gb", Version: "0.1.0"},
		"c": {Id: "c", RpcAddr: "gc", Version: "0.1.0"},
	}
	probes := map[raft.ServerID]*probe{
		"b": {measured: true, stats: raftautopilot.ServerStats{LastIndex: 9, LastTerm: 2, LastContact: noContact},
			info: &droverv1.ServerInfoResponse{Server: &droverv1.ServerMember{Id: "b", Version: "0.2.0"},
				RaftState: droverv1.RaftState_RAFT_STATE_FOLLOWER},
			err: errors.New("connection refused"), failingSince: stable},
		"c": {measured: true, stats: raftautopilot.ServerStats{LastIndex: 10, LastTerm: 2, LastContact: time.Millisecond},
			info: &droverv1.ServerInfoResponse{Server: &droverv1.ServerMember{Id: "c", Version: "0.2.0"},
				RaftState: droverv1.RaftState_RAFT_STATE_FOLLOWER}},
		"d": {err: errNoRPCAddr, stats: raftautopilot.ServerStats{LastContact: noContact}},
	}
	state := &raftautopilot.State{
		Healthy:          false,
		FailureTolerance: 0,
		Leader:           "a",
		Servers: map[raft.ServerID]*raftautopilot.ServerState{
			"a": {Server: raftautopilot.Server{NodeStatus: raftautopilot.NodeAlive}, State: raftautopilot.RaftLeader,
				Stats:  raftautopilot.ServerStats{LastIndex: 10, LastTerm: 2},
				Health: raftautopilot.ServerHealth{Healthy: true, StableSince: stable}},
			"b": {Server: raftautopilot.Server{NodeStatus: raftautopilot.NodeAlive}, State: raftautopilot.RaftVoter,
				Stats:  raftautopilot.ServerStats{LastIndex: 9, LastTerm: 2, LastContact: noContact},
				Health: raftautopilot.ServerHealth{Healthy: false, StableSince: stable}},
			"c": {Server: raftautopilot.Server{NodeStatus: raftautopilot.NodeAlive}, State: raftautopilot.RaftVoter,
				Stats:  raftautopilot.ServerStats{LastIndex: 10, LastTerm: 2, LastContact: time.Millisecond},
				Health: raftautopilot.ServerHealth{Healthy: true, StableSince: stable}},
		},
	}
	in := memberInputs{
		config: config, state: state, records: records, probes: probes,
		localID: "a", localVersion: "0.3.0", localRaftState: droverv1.RaftState_RAFT_STATE_LEADER,
		leaderID: "a", conf: conf,
	}

	t.Run("running", func(t *testing.T) {
		got := buildMembers(in)
		if got.GetLeaderId() != "a" || got.GetHealthy() || got.GetFailureTolerance() != 0 {
			t.Errorf("cluster = leader %q healthy %t ft %d", got.GetLeaderId(), got.GetHealthy(), got.GetFailureTolerance())
		}
		want := []*droverv1.ServerHealth{
			{Id: "a", RpcAddr: "ga", RaftAddr: "ra", Version: "0.3.0", RaftState: droverv1.RaftState_RAFT_STATE_LEADER,
				Voter: true, Leader: true, Healthy: true, StableSince: stable.UnixNano(), LastIndex: 10, LastTerm: 2, LastContact: durationpb.New(0)},
			{Id: "b", RpcAddr: "gb", RaftAddr: "rb", Version: "0.2.0", RaftState: droverv1.RaftState_RAFT_STATE_UNSPECIFIED,
				Voter: true, StableSince: stable.UnixNano(), LastIndex: 9, LastTerm: 2, Error: "connection refused"},
			{Id: "c", RpcAddr: "gc", RaftAddr: "rc", Version: "0.2.0", RaftState: droverv1.RaftState_RAFT_STATE_FOLLOWER,
				Voter: true, Healthy: true, StableSince: stable.UnixNano(), LastIndex: 10, LastTerm: 2, LastContact: durationpb.New(time.Millisecond)},
			{Id: "d", RaftAddr: "rd", Error: errNoRPCAddr.Error()},
		}
		checkHealth(t, got.GetServers(), want)
	})

	t.Run("not running", func(t *testing.T) {
		in := in
		in.state = &raftautopilot.State{}
		in.probes = nil
		in.localRaftState = droverv1.RaftState_RAFT_STATE_FOLLOWER
		in.leaderID = "c"
		got := buildMembers(in)
		if got.GetLeaderId() != "c" || got.GetHealthy() || got.GetFailureTolerance() != 0 {
			t.Errorf("cluster = leader %q healthy %t ft %d", got.GetLeaderId(), got.GetHealthy(), got.GetFailureTolerance())
		}
		want := []*droverv1.ServerHealth{
			{Id: "c", RpcAddr: "gc", RaftAddr: "rc", Version: "0.1.0", Voter: true, Leader: true},
			{Id: "a", RpcAddr: "ga", RaftAddr: "ra", Version: "0.3.0", RaftState: droverv1.RaftState_RAFT_STATE_FOLLOWER, Voter: true},
			{Id: "b", RpcAddr: "gb", RaftAddr: "rb", Version: "0.1.0", Voter: true},
			{Id: "d", RaftAddr: "rd"},
		}
		checkHealth(t, got.GetServers(), want)
	})
}

func checkHealth(t *testing.T, got, want []*droverv1.ServerHealth) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d servers, want %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].EqualVT(want[i]) {
			t.Errorf("server %d:\n got  %v\n want %v", i, got[i], want[i])
		}
	}
}
