package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Pool runs this server's scheduler workers. Its methods are safe for
// concurrent use. A pool runs once: Start after Stop does nothing.
type Pool struct {
	cfg          Config
	broker       Broker
	leader       Leader
	local        LocalState
	newScheduler NewScheduler

	// onChange, when set (by tests, before Start), is called after every
	// change of a worker's status or counters, sometimes with p.mu held: it
	// must not call the pool.
	onChange func()

	wg sync.WaitGroup

	mu         sync.Mutex
	ctx        context.Context // the workers' context, from Start; Stop cancels it
	cancel     context.CancelCauseFunc
	started    bool
	stopped    bool
	num        int
	schedulers []droverv1.JobType // replaced, never changed in place
	paused     bool
	// isLeader is set while this server leads: the first LeaderPausedWorkers
	// of the active workers then park, leaving CPU to the broker and the
	// plan applier (reference 4.7).
	isLeader bool
	// changed is closed, and replaced, whenever what parks a worker
	// changes; parked workers then look again.
	changed chan struct{}
	// workers are the live workers in start order, retiring ones included
	// until they exit; after Stop they stay, stopped, for Workers().
	workers []*worker
	seq     int
}

// NewPool makes a pool; Start runs it. A Config value out of range is
// replaced by its default, with a warning in the log.
func NewPool(cfg Config, broker Broker, leader Leader, local LocalState, newScheduler NewScheduler) *Pool {
	cfg, problem := cfg.withDefaults()
	if problem != nil {
		cfg.Logger.Warn("worker pool config adjusted", "server_id", cfg.ServerID, "error", problem)
	}
	return &Pool{
		cfg:          cfg,
		broker:       broker,
		leader:       leader,
		local:        local,
		newScheduler: newScheduler,
		num:          cfg.NumWorkers,
		schedulers:   cfg.Schedulers,
		changed:      make(chan struct{}),
	}
}

// Start starts the workers. They run until Stop or until ctx ends; call
// Stop in either case, to wait for them.
func (p *Pool) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopped {
		return
	}
	p.started = true
	p.ctx, p.cancel = context.WithCancelCause(ctx)
	p.resize()
}

// Stop cancels every wait of every worker (their errors wrap
// ErrShuttingDown) and returns when every worker goroutine has exited.
// Evaluations in hand are nacked on the way out; each Nack (like each Ack)
// is bounded to 5s, so an unreachable leader cannot hold Stop longer.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.stopped = true
	for _, w := range p.workers {
		w.markStopping()
	}
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel(ErrShuttingDown)
	}
	p.wg.Wait()
}

// Pause parks every worker: one busy with an evaluation finishes it, then
// waits before its next dequeue until Resume or Stop. Workers started while
// the pool is paused park at once.
func (p *Pool) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.wakeParked()
	}
}

// Resume lets paused workers dequeue again.
func (p *Pool) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		p.wakeParked()
	}
}

// SetLeader tells the pool whether this server is the leader. While it is,
// LeaderPausedWorkers(n) of its n workers park after their current
// evaluation: the leader's broker, plan applier and raft need the CPU more,
// and the followers' workers take the work.
func (p *Pool) SetLeader(leader bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isLeader != leader {
		p.isLeader = leader
		p.wakeParked()
	}
}

// LeaderPausedWorkers is how many of n workers park on the leader: three
// quarters, rounded down, so a leader with one worker keeps it.
func LeaderPausedWorkers(n int) int { return 3 * n / 4 }

// wakeParked makes parked workers look again at whether they may run.
// p.mu is held.
func (p *Pool) wakeParked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// SetConfig changes the number of workers (0..MaxWorkers()) and the
// evaluation types they dequeue (a non-empty subset of service, batch and
// system) at run time. New workers start at once; surplus ones, the most
// recently started, finish their current evaluation and exit. Every worker
// uses the new types from its next dequeue on.
func (p *Pool) SetConfig(num int, schedulers []droverv1.JobType) error {
	sched, err := validateWorkers(num, schedulers)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return fmt.Errorf("worker: set config: %w", ErrShuttingDown)
	}
	p.num, p.schedulers = num, sched
	if p.started {
		p.resize()
	}
	return nil
}

// Config returns the number of workers asked for, the enabled evaluation
// types and whether the pool is paused.
func (p *Pool) Config() (num int, schedulers []droverv1.JobType, paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.num, slices.Clone(p.schedulers), p.paused
}

// Workers describes every live worker, in start order, including those
// still finishing an evaluation after SetConfig shrank the pool; after Stop,
// the stopped ones.
func (p *Pool) Workers() []WorkerInfo {
	p.mu.Lock()
	workers := slices.Clone(p.workers)
	p.mu.Unlock()
	infos := make([]WorkerInfo, len(workers))
	for i, w := range workers {
		infos[i] = w.info()
	}
	return infos
}

// resize starts or retires workers until p.num are active. p.mu is held.
func (p *Pool) resize() {
	var active []*worker
	for _, w := range p.workers {
		if !w.isStopping() {
			active = append(active, w)
		}
	}
	for i := len(active); i < p.num; i++ {
		p.spawn()
	}
	for i := len(active) - 1; i >= p.num; i-- {
		active[i].markStopping()
	}
	// The leader's share of parked workers follows the new count.
	p.wakeParked()
}

// spawn starts one worker. p.mu is held.
func (p *Pool) spawn() {
	p.seq++
	w := newWorker(p, fmt.Sprintf("worker-%d", p.seq))
	p.workers = append(p.workers, w)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		w.run()
	}()
}

// exited forgets a worker that stopped because the pool shrank; after Stop
// the stopped workers stay listed.
func (p *Pool) exited(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.workers = slices.DeleteFunc(p.workers, func(x *worker) bool { return x == w })
	}
}

// enabled returns the evaluation types to dequeue.
func (p *Pool) enabled() []droverv1.JobType {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.schedulers)
}

// pauseGate reports whether w must park and, if so, the channel closed
// when that may have changed.
func (p *Pool) pauseGate(w *worker) (<-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return p.changed, true
	}
	if !p.isLeader {
		return nil, false
	}
	parked := LeaderPausedWorkers(p.num)
	for _, x := range p.workers {
		if parked == 0 {
			break
		}
		if x == w {
			return p.changed, true
		}
		if !x.isStopping() {
			parked--
		}
	}
	return nil, false
}

func (p *Pool) notify() {
	if p.onChange != nil {
		p.onChange()
	}
}
