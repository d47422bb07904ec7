package autopilot

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	raftautopilot "github.com/hashicorp/raft-autopilot"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// metaRPCAddr is the raftautopilot.Server.Meta key carrying a server's gRPC
// address from KnownServers to FetchServerStats: the library hands
// FetchServerStats only the Server values KnownServers returned.
const metaRPCAddr = "rpc_addr"

// noContact is the LastContact given to the library for a server whose
// contact with the leader is unknown (unreachable, never heard from a leader,
// shutting down). The library treats any negative LastContact as unhealthy.
const noContact = time.Duration(-1)

// probe is what the leader last learned about one server.
type probe struct {
	// info is the last successful Info answer; nil if there never was one
	// in this leadership term.
	info *droverv1.ServerInfoResponse
	// stats is what was last handed to the library for this server.
	stats raftautopilot.ServerStats
	// measured is set once stats hold a real answer (index and term), so
	// LastIndexes does not report zeros for servers that never answered.
	measured bool
	// err is the error of the latest probe; nil when it succeeded.
	err error
	// failingSince is when the current run of failed probes started; zero
	// while the server answers. Only real failures to reach the server
	// count, so it drives the dead-server decision.
	failingSince time.Time
}

// nodeStatus maps a server's probe history to the library's NodeStatus. A
// server is failed only once it has been unreachable continuously for
// deadAfter: a blip (one timed out probe, a restart) must never get a server
// removed from raft, and any success starts the clock again.
func nodeStatus(now, failingSince time.Time, deadAfter time.Duration) raftautopilot.NodeStatus {
	if failingSince.IsZero() || now.Sub(failingSince) < deadAfter {
		return raftautopilot.NodeAlive
	}
	return raftautopilot.NodeFailed
}

// knownInputs is everything knownServers needs, gathered by the caller so
// the mapping stays pure.
type knownInputs struct {
	now       time.Time
	config    []raft.Server
	records   map[string]*droverv1.ServerMember
	probes    map[raft.ServerID]*probe
	localID   raft.ServerID
	isLeader  bool
	version   string // the local binary's version
	deadAfter time.Duration
}

// knownServers builds the library's KnownServers answer. It lists every
// server of the raft configuration, recorded or not: the library removes raft
// servers missing from KnownServers as "stale" directly through raft, without
// asking, so leaving one out would evict it (or, if it were us, the leader).
// Records for servers not in the configuration are left out: the library
// ignores them for pruning but would still have us probe them.
func knownServers(in knownInputs) map[raft.ServerID]*raftautopilot.Server {
	out := make(map[raft.ServerID]*raftautopilot.Server, len(in.config))
	for _, rs := range in.config {
		srv := &raftautopilot.Server{
			ID:          rs.ID,
			Name:        string(rs.ID),
			Address:     rs.Address,
			NodeStatus:  raftautopilot.NodeAlive,
			RaftVersion: raft.ProtocolVersionMax,
			// NodeType must be set: the default StablePromoter only counts
			// NodeVoter servers as potential voters, and pruning allows
			// removing (potentialVoters-1)/2 voters, so without it no failed
			// voter would ever be removed and MinQuorum would be ignored.
			NodeType: raftautopilot.NodeVoter,
			Meta:     map[string]string{},
		}
		rec := in.records[string(rs.ID)]
		if rec != nil {
			srv.Version = rec.GetVersion()
			srv.Meta[metaRPCAddr] = rec.GetRpcAddr()
		}
		if rs.ID == in.localID {
			// The leader never probes itself, so it is alive by definition
			// and reports the version it is running.
			srv.Version = in.version
			srv.IsLeader = in.isLeader
		} else if p := in.probes[rs.ID]; p != nil {
			if v := p.info.GetServer().GetVersion(); v != "" {
				srv.Version = v
			}
			srv.NodeStatus = nodeStatus(in.now, p.failingSince, in.deadAfter)
		}
		out[rs.ID] = srv
	}
	return out
}

// contactDuration is ServerHealth.last_contact: unset when the contact is
// unknown (noContact).
func contactDuration(d time.Duration) *durationpb.Duration {
	if d < 0 {
		return nil
	}
	return durationpb.New(d)
}

// statsFromInfo converts a server's Info answer into the library's stats.
func statsFromInfo(resp *droverv1.ServerInfoResponse) raftautopilot.ServerStats {
	st := raftautopilot.ServerStats{
		LastIndex:   resp.GetLastIndex(),
		LastTerm:    resp.GetLastTerm(),
		LastContact: resp.EffectiveLastContact(),
	}
	// A negative contact means "never heard from a leader"; a server whose
	// raft is shutting down still answers gRPC for a moment but is no
	// longer part of the cluster's health.
	if st.LastContact < 0 || resp.GetRaftState() == droverv1.RaftState_RAFT_STATE_SHUTDOWN {
		st.LastContact = noContact
	}
	return st
}

// LastTerm is the term of a server's last entry, read from raft.Stats: the
// newest log entry's, or the snapshot's when the snapshot is newer than the
// log. A server that has installed a snapshot from the leader and received
// no entry since has an empty log, and raft then reports last_log_term 0;
// taken as is, that server would never match the leader's term, never be
// healthy, and a rebuilt server in a quiet cluster would never be promoted.
func LastTerm(stats map[string]string) uint64 {
	num := func(key string) uint64 {
		v, _ := strconv.ParseUint(stats[key], 10, 64)
		return v
	}
	if num("last_snapshot_index") > num("last_log_index") {
		return num("last_snapshot_term")
	}
	return num("last_log_term")
}

// localStats reads the leader's own stats from raft.Stats and LastIndex
// instead of an RPC to itself. LastIndex (which accounts for snapshots) is the
// same value the library compares every server against.
func localStats(stats map[string]string, lastIndex uint64) raftautopilot.ServerStats {
	st := raftautopilot.ServerStats{LastIndex: lastIndex, LastTerm: LastTerm(stats), LastContact: noContact}
	// raft reports "0" on the leader, "never" before any contact, else a
	// time.Duration string.
	if d, err := time.ParseDuration(stats["last_contact"]); err == nil {
		st.LastContact = d
	}
	return st
}

// RaftState maps raft's own state to the wire enum; the server uses it
// too, so both describe a server the same way.
func RaftState(s raft.RaftState) droverv1.RaftState {
	switch s {
	case raft.Follower:
		return droverv1.RaftState_RAFT_STATE_FOLLOWER
	case raft.Candidate:
		return droverv1.RaftState_RAFT_STATE_CANDIDATE
	case raft.Leader:
		return droverv1.RaftState_RAFT_STATE_LEADER
	case raft.Shutdown:
		return droverv1.RaftState_RAFT_STATE_SHUTDOWN
	}
	return droverv1.RaftState_RAFT_STATE_UNSPECIFIED
}

// unhealthyReason explains, in the library's own order of checks, why a
// server is not healthy, so an operator reading `server members` does not
// have to know the thresholds. Empty when healthy.
func unhealthyReason(ss *raftautopilot.ServerState, leader *raftautopilot.ServerState, conf *raftautopilot.Config) string {
	if ss == nil {
		return "not measured yet"
	}
	if ss.Health.Healthy {
		return ""
	}
	switch {
	case ss.Server.NodeStatus == raftautopilot.NodeFailed:
		return "failed: unreachable for longer than the dead server threshold"
	case ss.Server.NodeStatus != raftautopilot.NodeAlive:
		return fmt.Sprintf("node status %s", ss.Server.NodeStatus)
	case leader == nil:
		return "no leader"
	case ss.Stats.LastContact < 0:
		return "no contact with the leader"
	case ss.Stats.LastContact > conf.LastContactThreshold:
		return fmt.Sprintf("last contact with the leader %s ago exceeds %s", ss.Stats.LastContact, conf.LastContactThreshold)
	case ss.Stats.LastTerm != leader.Stats.LastTerm:
		return fmt.Sprintf("on term %d, the leader on %d", ss.Stats.LastTerm, leader.Stats.LastTerm)
	case ss.Stats.LastIndex+conf.MaxTrailingLogs < leader.Stats.LastIndex:
		return fmt.Sprintf("%d entries behind the leader (more than %d)", leader.Stats.LastIndex-ss.Stats.LastIndex, conf.MaxTrailingLogs)
	}
	// Health is recomputed only every update interval; the stats copied
	// into the state may already have moved on.
	return "unhealthy at the last check"
}

// memberInputs is everything buildMembers needs, gathered by the caller so
// the mapping stays pure.
type memberInputs struct {
	config         []raft.Server
	state          *raftautopilot.State // the library's; never nil, may be empty
	records        map[string]*droverv1.ServerMember
	probes         map[raft.ServerID]*probe
	localID        raft.ServerID
	localVersion   string
	localRaftState droverv1.RaftState
	leaderID       raft.ServerID // as raft reports it now; empty during an election
	conf           *raftautopilot.Config
}

// buildMembers assembles the operator view: one entry per server of the raft
// configuration, leader first, then voters, then by id.
func buildMembers(in memberInputs) *droverv1.ServerMembersResponse {
	st := in.state
	leaderState := st.Servers[st.Leader]
	resp := &droverv1.ServerMembersResponse{
		LeaderId: string(in.leaderID),
		// An empty state means autopilot is not running here (a follower,
		// or just after an election): nothing is known to be healthy.
		Healthy:          st.Healthy && len(st.Servers) > 0,
		FailureTolerance: int32(st.FailureTolerance),
	}
	for _, rs := range in.config {
		h := &droverv1.ServerHealth{
			Id:       string(rs.ID),
			RaftAddr: string(rs.Address),
			Voter:    rs.Suffrage == raft.Voter,
			Leader:   rs.ID == in.leaderID,
		}
		rec := in.records[string(rs.ID)]
		p := in.probes[rs.ID]
		h.RpcAddr = rec.GetRpcAddr()
		h.Version = rec.GetVersion()
		if p != nil {
			if h.RpcAddr == "" {
				h.RpcAddr = p.info.GetServer().GetRpcAddr()
			}
			if v := p.info.GetServer().GetVersion(); v != "" {
				h.Version = v
			}
			if p.err == nil && p.info != nil {
				// Only a current answer says what role the server plays;
				// the last one from before it went away would mislead.
				h.RaftState = p.info.GetRaftState()
			}
			if p.measured || p.err != nil {
				h.LastIndex = p.stats.LastIndex
				h.LastTerm = p.stats.LastTerm
				h.LastContact = contactDuration(p.stats.LastContact)
			}
		}
		if rs.ID == in.localID {
			h.Version = in.localVersion
			h.RaftState = in.localRaftState
		}
		ss := st.Servers[rs.ID]
		if ss != nil {
			h.Healthy = ss.Health.Healthy
			if !ss.Health.StableSince.IsZero() {
				h.StableSince = ss.Health.StableSince.UnixNano()
			}
			// Health was judged on the state's stats: show those.
			h.LastIndex = ss.Stats.LastIndex
			h.LastTerm = ss.Stats.LastTerm
			h.LastContact = contactDuration(ss.Stats.LastContact)
		}
		switch {
		case p != nil && p.err != nil:
			h.Error = p.err.Error()
		case len(st.Servers) == 0:
			// Not running: leave the reason empty rather than claim
			// every server is unmeasured.
		default:
			h.Error = unhealthyReason(ss, leaderState, in.conf)
		}
		resp.Servers = append(resp.Servers, h)
	}
	slices.SortFunc(resp.Servers, func(a, b *droverv1.ServerHealth) int {
		if a.GetLeader() != b.GetLeader() {
			if a.GetLeader() {
				return -1
			}
			return 1
		}
		if a.GetVoter() != b.GetVoter() {
			if a.GetVoter() {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.GetId(), b.GetId())
	})
	return resp
}
