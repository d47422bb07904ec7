package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/rpc"
)

// barrierTimeout bounds the wait of a new leader for its state to catch up
// with every entry committed before it took over.
const barrierTimeout = time.Minute

// handOffWait bounds how long a stopping leader waits to learn who took
// over after a leadership transfer.
const handOffWait = 3 * time.Second

// LeaderDuty is one component that runs only on the leader: autopilot, the
// eval broker and plan applier, heartbeat timers, GC and the drainer.
// Duties are registered once, before the server starts, and run in
// registration order; they stop in reverse order.
type LeaderDuty struct {
	// Name appears in logs.
	Name string
	// Start begins the duty. ctx ends when leadership is revoked; calls in
	// flight that depend on leadership should fail with a retryable error
	// (rpc.ErrUnavailable) then. A Start error revokes leadership and hands
	// it to another server.
	Start func(ctx context.Context) error
	// Stop ends the duty and returns once it has stopped. May be nil.
	Stop func()
}

// periodicDuty runs round every interval while this server leads, the
// first time one interval after leadership is established.
func periodicDuty(name string, every time.Duration, round func(ctx context.Context)) LeaderDuty {
	var wg sync.WaitGroup
	return LeaderDuty{
		Name: name,
		Start: func(ctx context.Context) error {
			wg.Go(func() {
				ticker := time.NewTicker(every)
				defer ticker.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-ticker.C:
						round(ctx)
					}
				}
			})
			return nil
		},
		Stop: wg.Wait,
	}
}

// leadership runs the leader duties as this server gains and loses
// leadership, and tells waiters when the leader changes.
type leadership struct {
	duties []LeaderDuty

	mu      sync.Mutex
	running []LeaderDuty
	cancel  context.CancelFunc
	// changed is closed (and replaced) whenever the leader or this
	// server's readiness as leader changes.
	changed chan struct{}
}

func newLeadership() *leadership {
	return &leadership{changed: make(chan struct{})}
}

// notifyChanged wakes everyone waiting for a leader change.
func (l *leadership) notifyChanged() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.changed)
	l.changed = make(chan struct{})
}

// changedCh is closed at the next leader change.
func (l *leadership) changedCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// start runs every duty under a new leadership context. When one fails,
// the ones started are stopped again and its error returned.
func (l *leadership) start(s *Server) error {
	ctx, cancel := context.WithCancel(context.Background())
	l.mu.Lock()
	l.cancel = cancel
	l.mu.Unlock()
	for _, d := range l.duties {
		if err := d.Start(ctx); err != nil {
			l.stop()
			return fmt.Errorf("start leader duty %s: %w", d.Name, err)
		}
		l.mu.Lock()
		l.running = append(l.running, d)
		l.mu.Unlock()
		s.logger.Debug("leader duty started", "duty", d.Name)
	}
	return nil
}

// stop ends the leadership context and stops the running duties, newest
// first.
func (l *leadership) stop() {
	l.mu.Lock()
	if l.cancel != nil {
		l.cancel()
		l.cancel = nil
	}
	running := l.running
	l.running = nil
	l.mu.Unlock()
	for i := len(running) - 1; i >= 0; i-- {
		if running[i].Stop != nil {
			running[i].Stop()
		}
	}
}

// monitorLeadership follows this server's leadership and the cluster's
// leader. It runs the establish and revoke steps in raft's order of
// transitions, and keeps health checks and forwarding waiters in step.
func (s *Server) monitorLeadership(observations <-chan raft.Observation) {
	// raft starts before the observer is registered: a restarted follower
	// may have heard from the leader already, and that observation is lost.
	// Start from what raft knows now.
	s.updateHealth()
	for {
		select {
		case isLeader := <-s.raft.LeaderNotify():
			if isLeader {
				s.establishLeadership()
			} else {
				s.revokeLeadership()
			}
		case <-observations:
		case done := <-s.reassert:
			s.revokeLeadership()
			if s.raft.Raft().State() == raft.Leader {
				s.establishLeadership()
			}
			close(done)
		case <-s.shutdownCh:
			s.revokeLeadership()
			return
		}
		s.leader.notifyChanged()
		s.updateHealth()
	}
}

// establishLeadership waits until this new leader has applied everything
// committed before it took over, then starts the leader duties. Only then
// does it answer for the cluster. If a duty cannot start, the server gives
// leadership away rather than lead without it.
//
// The barrier's wait ends at shutdown: raft may shut down without ever
// answering it (an FSM that halts makes the server shut down while it
// establishes leadership), and this goroutine must then return for the
// shutdown to finish.
func (s *Server) establishLeadership() {
	if err := s.waitAnswered(s.raft.Raft().Barrier(barrierTimeout)); err != nil {
		s.logger.Error("new leader could not catch up with the log; not serving", "err", err)
		return
	}
	if err := s.leader.start(s); err != nil {
		s.logger.Error("could not establish leadership; transferring it", "err", err)
		if err := s.raft.Raft().LeadershipTransfer().Error(); err != nil {
			s.logger.Error("leadership transfer failed", "err", err)
		}
		return
	}
	term := s.raft.Raft().CurrentTerm()
	s.establishedTerm.Store(term)
	s.logger.Info("established leadership", "index", s.state.LatestIndex(), "term", term)
}

// leading reports whether this server is a ready leader: raft leader in the
// term in which it established leadership. A term that moved on means
// leadership was lost (and perhaps regained) since: until establishment
// runs again, entries committed before the new term may not be applied.
func (s *Server) leading() bool {
	r := s.raft.Raft()
	term := s.establishedTerm.Load()
	return term != 0 && term == r.CurrentTerm() && r.State() == raft.Leader
}

// revokeLeadership stops answering as leader, then stops the duties.
func (s *Server) revokeLeadership() {
	if s.establishedTerm.Swap(0) != 0 {
		s.logger.Info("lost leadership")
	}
	s.leader.stop()
}

// updateHealth reports the drover services serving while a leader is known
// and, on the leader, once it has caught up.
func (s *Server) updateHealth() {
	isLeader := s.raft.Raft().State() == raft.Leader
	s.rpc.SetServing(s.KnownLeader() && (!isLeader || s.leading()))
}

// Leader describes the leader as this server knows it.
func (s *Server) Leader() rpc.Leader {
	_, id := s.raft.Raft().LeaderWithID()
	if id == "" {
		return rpc.Leader{}
	}
	if string(id) == s.id {
		ready := s.leading()
		return rpc.Leader{ID: s.id, RPCAddr: s.rpcAddr, Local: true, Ready: ready}
	}
	l := rpc.Leader{ID: string(id)}
	if m := s.state.Snapshot().ServerByID(string(id)); m != nil {
		l.RPCAddr = m.GetRpcAddr()
	}
	return l
}

// LeaderChanged returns a channel closed at the next leader change.
func (s *Server) LeaderChanged() <-chan struct{} { return s.leader.changedCh() }

// leaderDuties lists the leader-only components in the order they start.
// Heartbeat timers start after scheduling, so that the evaluations of the
// first nodes they mark find the broker enabled. The leader's own server record needs no duty: every server's
// announce loop (join.go) writes it once a leader is ready.
func (s *Server) leaderDuties() []LeaderDuty {
	return []LeaderDuty{
		{Name: "autopilot", Start: func(ctx context.Context) error {
			// Autopilot's start measures every server once, which can
			// take a second; leadership need not wait for that. Start
			// returns at once if leadership ended meanwhile.
			go s.autopilot.Start(ctx)
			return nil
		}, Stop: s.autopilot.Stop},
		s.sched.duty(),
		(&leaderWorkerShare{s: s}).duty(),
		s.heartbeats.duty(),
		s.gc.duty(),
		(&drainer{s: s}).duty(),
		(&deployer{s: s}).duty(),
		(&storageWatch{s: s}).duty(),
		(&clusterMetadata{s: s}).duty(),
	}
}

// handOffLeadership transfers leadership before a leader shuts down, so the
// cluster does not wait out an election timeout. Failure is logged, not
// fatal: the others elect a leader anyway.
func (s *Server) handOffLeadership() {
	r := s.raft.Raft()
	if r.State() != raft.Leader || !s.hasOtherVoters() {
		return
	}
	s.logger.Info("transferring leadership before shutdown")
	if err := r.LeadershipTransfer().Error(); err != nil {
		s.logger.Warn("leadership transfer before shutdown failed", "err", err)
		return
	}
	// The transfer completes when the target wins its election; wait
	// briefly to name it.
	timeout := time.NewTimer(handOffWait)
	defer timeout.Stop()
	for {
		changed := s.LeaderChanged()
		if l := s.Leader(); l.ID != "" && l.ID != s.id {
			s.logger.Info("leadership transferred", "new_leader", l.ID)
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			s.logger.Info("leadership transferred; new leader not known yet")
			return
		}
	}
}

// hasOtherVoters reports whether any voter besides this server could take
// leadership over.
func (s *Server) hasOtherVoters() bool {
	conf, err := s.configuration()
	if err != nil {
		return false
	}
	for _, srv := range conf.Servers {
		if srv.Suffrage == raft.Voter && string(srv.ID) != s.id {
			return true
		}
	}
	return false
}
