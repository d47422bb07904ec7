package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/backoff"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Back-off of the loops that form, join and announce: quick at first so a
// cluster whose servers start together forms fast, then slower so a server
// waiting for peers does not flood them or the log.
const (
	minRetryDelay = 250 * time.Millisecond
	maxRetryDelay = 15 * time.Second
	// joinCallTimeout bounds one Join, which may wait for a leader and a
	// raft configuration change.
	joinCallTimeout = 15 * time.Second
	// quietAttempts failed attempts are logged at debug level before the
	// loop starts warning, so an ordinary start-up stays quiet.
	quietAttempts = 4
)

// errWaiting is returned by a step of a retry loop that has not failed but
// cannot finish yet.
var errWaiting = errors.New("waiting")

// retry runs step until it succeeds or ctx ends, backing off between
// attempts and saying why it is not progressing. A wait also ends early
// when the channel from wake (if any) closes.
func retry(ctx context.Context, logger *slog.Logger, what string, step func(context.Context) error, wake func() <-chan struct{}) {
	pace := backoff.Policy{Initial: minRetryDelay, Max: maxRetryDelay}.New()
	for attempt := 1; ; attempt++ {
		var woken <-chan struct{}
		if wake != nil {
			woken = wake()
		}
		err := step(ctx)
		if err == nil {
			if attempt > 1 {
				logger.Info(what+": done", "attempts", attempt)
			}
			return
		}
		delay := pace.Next(0)
		level := slog.LevelDebug
		if attempt > quietAttempts {
			level = slog.LevelWarn
		}
		logger.Log(ctx, level, what+": not done yet; retrying", "attempt", attempt, "retry_in", delay, "reason", err)
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-woken:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// forming is the set of servers without raft state that this server has
// heard of while forming a new cluster, itself included.
type forming struct {
	mu      sync.Mutex
	members map[string]*droverv1.ServerMember
}

func (f *forming) add(m *droverv1.ServerMember) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.members == nil {
		f.members = make(map[string]*droverv1.ServerMember)
	}
	f.members[m.GetId()] = m
}

// list returns the servers in id order.
func (f *forming) list() []*droverv1.ServerMember {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := slices.Sorted(maps.Keys(f.members))
	out := make([]*droverv1.ServerMember, len(ids))
	for i, id := range ids {
		out[i] = f.members[id]
	}
	return out
}

// startClustering runs, in the background, what this server needs to
// become part of a cluster: bootstrap a new one with -bootstrap-expect,
// join a running one with -join, and in every case make sure the cluster
// records this server's current addresses and version.
func (s *Server) startClustering() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx := s.lifetime
		if !s.raft.HasState() {
			switch {
			case s.cfg.BootstrapExpect > 0:
				retry(ctx, s.logger, "form cluster", s.formStep, nil)
			case len(s.cfg.Join) > 0:
				retry(ctx, s.logger, "join cluster", s.joinStep, nil)
			}
		}
		retry(ctx, s.logger, "announce this server to the cluster", s.announceStep, s.LeaderChanged)
		s.keepAnnounced(ctx)
	}()
}

// keepAnnounced announces this server again whenever the replicated
// record of it stops matching it: a restored backup, or a snapshot the
// leader installs after one, holds the addresses and version the servers
// had when the backup was taken (in a cluster rebuilt after losing every
// server, those of servers that are gone). Until the record is right,
// other servers cannot forward calls to this one when it leads.
func (s *Server) keepAnnounced(ctx context.Context) {
	var index uint64
	for {
		var current bool
		next, _ := s.state.BlockingQuery(ctx, index, func(snap *state.Snapshot) (uint64, error) {
			current = sameMember(snap.ServerByID(s.id), s.member())
			return snap.TableIndex(state.TableServers), nil
		})
		if ctx.Err() != nil {
			return
		}
		// A server an operator removed from the raft configuration stays
		// out: it only announces itself again while it is a member.
		if !current && s.inConfiguration() {
			s.logger.Info("the cluster's record of this server is out of date; announcing it again", "index", next)
			retry(ctx, s.logger, "announce this server to the cluster", s.announceStep, s.LeaderChanged)
		}
		index = next
	}
}

// formStep asks every -join address about itself. It bootstraps once it
// knows exactly BootstrapExpect servers without state; it joins instead when
// it finds a server that already belongs to a cluster.
func (s *Server) formStep(ctx context.Context) error {
	if s.raft.HasState() {
		return nil // a leader already replicated a configuration to us
	}
	s.forming.add(s.member())
	var problems []string
	for _, addr := range s.cfg.Join {
		info, err := s.peers.info(ctx, addr)
		switch {
		case err != nil:
			problems = append(problems, err.Error())
			continue
		case info.GetServer().GetId() == s.id:
			continue // our own address in the list
		case info.GetHasState():
			s.logger.Info("found a server that already belongs to a cluster; joining instead of bootstrapping", "peer", addr)
			return s.joinStep(ctx)
		case int(info.GetBootstrapExpect()) != s.cfg.BootstrapExpect:
			problems = append(problems, fmt.Sprintf("server %s at %s expects %d servers, this one %d",
				info.GetServer().GetId(), addr, info.GetBootstrapExpect(), s.cfg.BootstrapExpect))
			continue
		}
		s.forming.add(info.GetServer())
		for _, m := range info.GetForming() {
			s.forming.add(m)
		}
	}
	known := s.forming.list()
	switch {
	case len(known) > s.cfg.BootstrapExpect:
		return fmt.Errorf("found %d servers without state but bootstrap expect is %d (%s); refusing to bootstrap: %w",
			len(known), s.cfg.BootstrapExpect, memberIDs(known), errWaiting)
	case len(known) < s.cfg.BootstrapExpect:
		return fmt.Errorf("know %d of %d servers (%s); %s: %w",
			len(known), s.cfg.BootstrapExpect, memberIDs(known), strings.Join(problems, "; "), errWaiting)
	}
	servers := make([]raft.Server, len(known))
	for i, m := range known {
		servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.GetId()), Address: raft.ServerAddress(m.GetRaftAddr())}
	}
	if err := s.raft.BootstrapCluster(servers); err != nil {
		if errors.Is(err, raft.ErrCantBootstrap) {
			return nil // state arrived from a leader meanwhile
		}
		return err
	}
	s.logger.Info("bootstrapped a new cluster", "servers", memberIDs(known))
	return nil
}

func memberIDs(ms []*droverv1.ServerMember) string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.GetId()
	}
	return strings.Join(ids, ",")
}

// joinStep asks each -join address in turn to add this server; the server
// asked forwards the request to the leader.
func (s *Server) joinStep(ctx context.Context) error {
	var problems []string
	for _, addr := range s.cfg.Join {
		if err := s.joinVia(ctx, addr); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		s.logger.Info("joined the cluster", "via", addr)
		return nil
	}
	return fmt.Errorf("no join address accepted this server: %s", strings.Join(problems, "; "))
}

func (s *Server) joinVia(ctx context.Context, addr string) error {
	c, err := s.peers.cluster(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, joinCallTimeout)
	defer cancel()
	if _, err := c.Join(ctx, &droverv1.JoinRequest{Server: s.member()}); err != nil {
		return fmt.Errorf("join via %s: %w", addr, err)
	}
	return nil
}

// announceStep finishes once the replicated state records this server as
// it runs now. Otherwise it sends a Join through this server itself, which
// forwards it to the leader, once a leader is known. A server missing from
// its own raft configuration was removed while it was away: it asks the
// -join addresses to add it again.
func (s *Server) announceStep(ctx context.Context) error {
	if sameMember(s.state.Snapshot().ServerByID(s.id), s.member()) {
		return nil
	}
	if s.Leader().ID != "" {
		return s.joinVia(ctx, s.rpcAddr)
	}
	if len(s.cfg.Join) > 0 && !s.inConfiguration() {
		return s.joinStep(ctx)
	}
	return fmt.Errorf("no leader known yet: %w", errWaiting)
}

// inConfiguration reports whether this server is in its latest raft
// configuration.
func (s *Server) inConfiguration() bool {
	conf, err := s.configuration()
	if err != nil {
		return true
	}
	return slices.ContainsFunc(conf.Servers, func(srv raft.Server) bool { return string(srv.ID) == s.id })
}
