package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server/raftnode"
)

// rebuildTimeout bounds a rebuild's calls to the cluster.
const rebuildTimeout = 30 * time.Second

// errRebuildRefused marks a rebuild that did not happen; the data dir is
// untouched.
var errRebuildRefused = errors.New("not rebuilding from peers")

// rebuildFromPeers readies a damaged data dir for a fresh start as the same
// server: after checking that the cluster can spare this server, it has
// the leader remove it from the raft configuration, renames the raft state
// and the server-id file aside (kept for forensics), and writes the id
// again. The server then starts with no raft state and joins as a new
// non-voter; the leader sends it a snapshot and autopilot makes it a voter
// once it has caught up. Rejoining as a non-voter matters: a voter that
// lost its log could vote for a candidate missing committed entries.
//
// damage is what the start-up checks found; id is the server's id if known
// (from -server-id or an intact server-id file). It returns the id.
func (s *Server) rebuildFromPeers(damage error, id string) (string, error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s; the data dir is untouched. What the start-up checks found: %w",
			errRebuildRefused, fmt.Sprintf(format, args...), damage)
	}
	if len(s.cfg.Join) == 0 {
		return "", refuse("-rebuild-from-peers needs -join with the other servers' addresses, and a single-server cluster has no peer to rebuild from")
	}
	if id == "" {
		id = s.cfg.ServerID
	}
	if id == "" {
		recorded, ok := raftnode.RecordedServerID(s.dataDir)
		if !ok {
			return "", refuse("this server's id is unknown (no valid server-id file, no record in raft.db): give it with -server-id")
		}
		id = recorded
	}
	ctx, cancel := context.WithTimeout(s.lifetime, rebuildTimeout)
	defer cancel()
	via, inConfig, err := s.checkClusterCanSpare(ctx, id)
	if err != nil {
		return "", refuse("%v", err)
	}
	s.logger.Warn("data dir damaged; rebuilding this server from its peers", "server", id, "damage", damage, "via", via)
	if inConfig {
		op, err := s.peers.operator(via)
		if err != nil {
			return "", refuse("%v", err)
		}
		if _, err := op.RaftRemovePeer(ctx, &droverv1.RaftRemovePeerRequest{Id: id}); err != nil {
			return "", refuse("remove server %s from the raft configuration through %s: %v", id, via, err)
		}
		s.logger.Info("left the raft configuration; joining again as a new member", "server", id)
	}
	now := time.Now()
	if raftnode.StateExists(s.dataDir) {
		kept, err := raftnode.SetAside(s.dataDir, now)
		if err != nil {
			return "", err
		}
		s.logger.Warn("damaged raft state set aside; remove it once no longer needed", "kept_at", kept)
	}
	idPath := filepath.Join(s.dataDir, serverIDFile)
	if _, err := os.Stat(idPath); err == nil {
		kept := fmt.Sprintf("%s.damaged-%s", idPath, now.UTC().Format("20060102T150405Z"))
		if err := os.Rename(idPath, kept); err != nil {
			return "", fmt.Errorf("set the server-id file aside: %w", err)
		}
	}
	if err := writeFileAtomic(idPath, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("store server id: %w", err)
	}
	return id, nil
}

// checkClusterCanSpare asks the -join addresses for the leader's raft
// configuration and health, and fails unless another voter exists and the
// other voters that are healthy form a quorum of the configuration without
// this server: removing it must not stop the cluster. It returns the
// address that answered and whether id is in the configuration.
func (s *Server) checkClusterCanSpare(ctx context.Context, id string) (via string, inConfig bool, err error) {
	var problems []string
	for _, addr := range s.cfg.Join {
		inConfig, err := s.canSpare(ctx, addr, id)
		if err == nil {
			return addr, inConfig, nil
		}
		problems = append(problems, err.Error())
		if errors.Is(err, errCannotSpare) {
			return "", false, err
		}
	}
	return "", false, fmt.Errorf("no peer could describe the cluster (rebuilding needs a running cluster with a leader): %s", strings.Join(problems, "; "))
}

// errCannotSpare: the cluster answered, and cannot do without this server.
var errCannotSpare = errors.New("the cluster cannot spare this server")

func (s *Server) canSpare(ctx context.Context, addr, id string) (inConfig bool, err error) {
	op, err := s.peers.operator(addr)
	if err != nil {
		return false, err
	}
	callCtx, cancel := context.WithTimeout(ctx, peerCallTimeout*3)
	defer cancel()
	peers, err := op.RaftListPeers(callCtx, &droverv1.RaftListPeersRequest{})
	if err != nil {
		return false, fmt.Errorf("raft peers from %s: %w", addr, err)
	}
	members, err := op.ServerMembers(callCtx, &droverv1.ServerMembersRequest{})
	if err != nil {
		return false, fmt.Errorf("server health from %s: %w", addr, err)
	}
	return spareCheck(addr, id, peers, members)
}

// spareCheck decides from the leader's raft configuration and server
// health whether the cluster can do without server id while it rebuilds,
// and whether id is in the configuration.
func spareCheck(addr, id string, peers *droverv1.RaftListPeersResponse, members *droverv1.ServerMembersResponse) (inConfig bool, err error) {
	healthy := map[string]bool{}
	for _, m := range members.GetServers() {
		healthy[m.GetId()] = m.GetHealthy()
	}
	var others, healthyOthers []string
	for _, p := range peers.GetPeers() {
		switch {
		case p.GetId() == id:
			inConfig = true
		case p.GetVoter():
			others = append(others, p.GetId())
			if healthy[p.GetId()] {
				healthyOthers = append(healthyOthers, p.GetId())
			}
		}
	}
	if len(others) == 0 {
		return false, fmt.Errorf("%w: it is the only voter of the cluster %s answered for (a single-server cluster has no peer to rebuild from)", errCannotSpare, addr)
	}
	if quorum := len(others)/2 + 1; len(healthyOthers) < quorum {
		return false, fmt.Errorf("%w: only %d of the other voters %v are healthy (%v), fewer than the %d a configuration without this server needs",
			errCannotSpare, len(healthyOthers), others, healthyOthers, quorum)
	}
	return inConfig, nil
}
