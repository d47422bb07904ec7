// Package simagent simulates drover agents over the real gRPC API, so that
// one process can drive servers the way thousands of machines would:
// register, heartbeat at the TTL the servers hand out, long-poll
// allocations, run them, and report every change, failing over between
// servers when one is down.
//
// A Fleet shares a few connections per server among all its agents and runs
// their calls from one schedule, so an idle agent costs a few hundred bytes
// and no goroutine (an agent that runs allocations keeps one goroutine in
// its GetAllocs long poll).
package simagent

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Fleet runs one Agent per configured node.
type Fleet struct {
	cfg    Config
	pool   *pool
	sched  *schedule
	agents []*Agent
	stats  counters
	// polls tracks the agents' GetAllocs loops, rejoins the calls of
	// flaky agents coming back with ReorderOnReturn.
	polls   sync.WaitGroup
	rejoins sync.WaitGroup

	// ctx is the fleet's context from Start on: GetAllocs loops run under
	// it rather than under a flaky agent's spell online.
	ctx context.Context

	mu       sync.Mutex
	started  bool
	stopped  bool
	cancel   context.CancelFunc
	loopDone chan struct{}
}

// NewFleet checks cfg and prepares the agents and connections; nothing is
// sent before Start.
func NewFleet(cfg Config) (*Fleet, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p, err := newPool(cfg.Servers, cfg.ConnsPerServer, cfg.DialOptions)
	if err != nil {
		return nil, err
	}
	f := &Fleet{cfg: cfg, pool: p, loopDone: make(chan struct{})}
	f.sched = newSchedule(f.runTask, cfg.MaxInFlight)
	flaky := 0
	for i := range cfg.Nodes {
		if _, ok := cfg.Faults.Flaky(i); ok {
			flaky++
		}
	}
	f.agents = make([]*Agent, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		f.agents[i] = newAgent(f, n, i, flaky)
	}
	return f, nil
}

// Start registers every node and keeps the agents going until ctx ends or
// Stop is called.
func (f *Fleet) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started || f.stopped {
		return errors.New("simagent: fleet already started")
	}
	f.started = true
	ctx, f.cancel = context.WithCancel(ctx)
	f.ctx = ctx
	now := time.Now()
	for _, a := range f.agents {
		if a.fault != nil {
			a.fault.begin(ctx)
			a.schedule(taskFault, now.Add(a.fault.phase+f.cfg.Faults.Every).UnixNano())
		}
		a.schedule(taskRegister, now.UnixNano())
	}
	go func() {
		defer close(f.loopDone)
		f.sched.loop(ctx)
	}()
	return nil
}

// Stop ends every agent's work, waits for all of the fleet's goroutines to
// return, and closes the connections. The servers will see the nodes miss
// their heartbeats.
func (f *Fleet) Stop() {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return
	}
	f.stopped = true
	started, cancel := f.started, f.cancel
	f.mu.Unlock()
	if started {
		cancel()
		<-f.loopDone
		// Rejoins are started by tasks, which have returned; polls are
		// started by tasks and by rejoins (a registration that succeeds
		// starts the GetAllocs loop), so the rejoins must be done before
		// waiting for the polls, or a poll could start after that wait.
		f.rejoins.Wait()
		f.polls.Wait()
	}
	_ = f.pool.close()
}

// runTask runs one task of an agent. A flaky agent's calls run under the
// context of its spell online; while it is silent they are dropped, and
// its return schedules them again.
func (f *Fleet) runTask(ctx context.Context, s *slot) (int64, bool) {
	a := s.agent
	switch s.kind {
	case taskAdvance:
		return a.advance(ctx)
	case taskFault:
		return a.toggle(ctx)
	}
	ctx, ok := a.callCtx(ctx)
	if !ok {
		return 0, false
	}
	switch s.kind {
	case taskRegister:
		return a.register(ctx)
	case taskHeartbeat:
		return a.heartbeat(ctx)
	case taskReport:
		return a.report(ctx)
	}
	return 0, false
}

// Agents returns the fleet's agents, in the order of Config.Nodes.
func (f *Fleet) Agents() []*Agent { return f.agents }

// Servers returns the server addresses the fleet knows: those configured
// and those the servers announced.
func (f *Fleet) Servers() []string { return f.pool.servers() }

// AddServers adds server addresses to those the agents use, as an
// operator points agents at a cluster rebuilt on new machines.
func (f *Fleet) AddServers(addrs ...string) { f.pool.learn(addrs) }

// Stats returns the counters and the agents' current statuses.
func (f *Fleet) Stats() Stats {
	st := f.stats.snapshot()
	for _, a := range f.agents {
		st.NodeStatuses[a.Status()]++
		if a.allocs != nil {
			a.allocs.count(st.AllocStatuses)
		}
	}
	return st
}

// HeartbeatedSince counts the agents whose last heartbeat accepted by the
// servers was sent at or after t.
func (f *Fleet) HeartbeatedSince(t time.Time) int {
	n := 0
	for _, a := range f.agents {
		if a.HeartbeatedSince(t) {
			n++
		}
	}
	return n
}
