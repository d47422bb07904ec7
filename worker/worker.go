package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/droverhq/drover/internal/backoff"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// worker is one goroutine of the pool, processing one evaluation at a time.
type worker struct {
	id      string
	pool    *Pool
	cfg     Config
	log     *slog.Logger
	started time.Time
	// ctx ends on Stop: it bounds everything, the evaluation in hand
	// included.
	ctx context.Context
	// idle ends on Stop or when the worker is retired; it bounds the waits
	// between evaluations (pause, backoff, waiting for a slow state), so a
	// retired worker finishes its evaluation but waits for nothing else.
	idle   context.Context
	retire context.CancelFunc

	// Owned by the worker goroutine.
	failures  int              // consecutive Dequeue errors
	retry     *backoff.Backoff // paces dequeues after errors
	planIndex uint64           // index of this worker's last committed plan

	mu       sync.Mutex
	status   Status
	evalID   string
	jobID    string
	stopping bool
	acked    uint64
	nacked   uint64
}

// newWorker makes a worker of p; p.mu is held (p.ctx is set).
func newWorker(p *Pool, id string) *worker {
	idle, retire := context.WithCancel(p.ctx)
	return &worker{
		pool:    p,
		cfg:     p.cfg,
		log:     p.cfg.Logger.With("server_id", p.cfg.ServerID, "worker_id", id),
		started: time.Now(),
		ctx:     p.ctx,
		idle:    idle,
		retire:  retire,
		status:  StatusStarting,
		id:      id,
		retry:   backoff.Policy{Initial: p.cfg.BackoffBase, Max: p.cfg.BackoffLimit}.New(),
	}
}

// run is the worker's loop (reference 4.2): park while paused, dequeue,
// wait for the state, schedule, ack or nack.
func (w *worker) run() {
	defer w.exit()
	for w.idle.Err() == nil {
		if !w.waitWhilePaused() {
			return
		}
		ev, token, waitIndex, ok := w.dequeue()
		if !ok {
			continue
		}
		if w.idle.Err() != nil {
			w.nack(ev, token, fmt.Errorf("eval %s dequeued by a stopping worker: %w", ev.GetId(), ErrShuttingDown))
			return
		}
		w.handle(ev, token, waitIndex)
	}
}

// waitWhilePaused parks the worker while the pool is paused, or while it is
// one of the leader's parked share; false means the worker must exit.
func (w *worker) waitWhilePaused() bool {
	for {
		changed, paused := w.pool.pauseGate(w)
		if !paused {
			return true
		}
		w.setStatus(StatusPaused)
		select {
		case <-changed:
		case <-w.idle.Done():
			return false
		}
	}
}

// dequeue asks the broker for an evaluation, backing off after an error.
// ok is false when nothing came.
func (w *worker) dequeue() (ev *droverv1.Evaluation, token string, waitIndex uint64, ok bool) {
	w.setStatus(StatusRunning)
	start := time.Now()
	ev, token, waitIndex, err := w.pool.broker.Dequeue(w.ctx, w.pool.enabled(), w.cfg.DequeueTimeout)
	w.cfg.Observer.Dequeued(time.Since(start), err == nil && ev != nil)
	if err != nil {
		if w.ctx.Err() != nil {
			return nil, "", 0, false
		}
		w.logDequeueError(err)
		w.backOff(w.retry.Next(0))
		w.failures++
		return nil, "", 0, false
	}
	w.failures = 0
	w.retry.Reset()
	return ev, token, waitIndex, ev != nil
}

// logDequeueError logs a failed dequeue, quietly while the worker is young:
// right after start, and during elections (Unavailable), there is often no
// leader to reach.
func (w *worker) logDequeueError(err error) {
	level := slog.LevelWarn
	if time.Since(w.started) < dequeueErrGrace {
		level = slog.LevelDebug
	}
	w.log.Log(w.ctx, level, "dequeue failed", "error", err, "failures", w.failures+1)
}

// backOff waits d in StatusBackoff, or less if the worker is stopping.
func (w *worker) backOff(d time.Duration) {
	w.setStatus(StatusBackoff)
	_ = backoff.Sleep(w.idle, d)
}

// handle processes one dequeued evaluation and acks or nacks it.
func (w *worker) handle(ev *droverv1.Evaluation, token string, waitIndex uint64) {
	w.setEval(ev)
	defer w.setEval(nil)
	index := minIndex(ev, waitIndex, w.planIndex)
	w.setStatus(StatusWaitingForState)
	start := time.Now()
	snap, err := w.snapshotAt(w.ctx, index)
	w.cfg.Observer.WaitedForState(time.Since(start), err == nil)
	if err != nil {
		w.nack(ev, token, fmt.Errorf("eval %s: %w", ev.GetId(), err))
		if errors.Is(err, ErrStateBehind) {
			w.waitForSlowState(index)
		}
		return
	}
	start = time.Now()
	err = w.schedule(ev, token, snap)
	w.cfg.Observer.Processed(ev.GetType(), time.Since(start), err)
	if err != nil {
		w.nack(ev, token, err)
		return
	}
	w.ack(ev, token)
}

// minIndex is the index the local state must reach before ev is scheduled:
// the broker's wait index (the highest modify index among the job's evals),
// the eval's own wait and modify indexes, and this worker's last committed
// plan, so that the worker sees its own writes. At least 1: an empty state
// has seen nothing.
func minIndex(ev *droverv1.Evaluation, waitIndex, planIndex uint64) uint64 {
	return max(waitIndex, ev.GetWaitIndex(), ev.GetModifyIndex(), planIndex, 1)
}

// waitForSlowState waits, after nacking for a state that is behind, up to
// SlowStateWait for the state to reach index before the worker dequeues
// again; a server replaying raft would otherwise nack everything it takes.
func (w *worker) waitForSlowState(index uint64) {
	ctx, cancel := context.WithTimeout(w.idle, w.cfg.SlowStateWait)
	defer cancel()
	w.setStatus(StatusWaitingForState)
	if _, err := w.pool.local.SnapshotMinIndex(ctx, index); err != nil {
		w.log.Debug("state still behind", "index", index, "latest", w.pool.local.LatestIndex(), "error", err)
	}
}

// schedule runs the evaluation's scheduler on snap.
func (w *worker) schedule(ev *droverv1.Evaluation, token string, snap scheduler.State) (err error) {
	w.setStatus(StatusScheduling)
	planner := newEvalPlanner(w, ev, token, snap.Index())
	defer func() {
		w.planIndex = max(w.planIndex, planner.committedIndex())
		if r := recover(); r != nil {
			// One poison evaluation must not take every server down in
			// turn: hand it back; the broker fails it after its delivery
			// limit.
			w.log.Error("scheduler panicked", "eval_id", ev.GetId(), "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("process eval %s: scheduler panicked: %v", ev.GetId(), r)
		}
	}()
	sched, err := w.pool.newScheduler(ev.GetType(), snap, planner)
	if err != nil {
		return fmt.Errorf("new %v scheduler for eval %s: %w", ev.GetType(), ev.GetId(), err)
	}
	if err := sched.Process(w.ctx, ev); err != nil {
		return w.ended(fmt.Sprintf("process eval %s", ev.GetId()), err)
	}
	return nil
}

// ack reports ev processed.
func (w *worker) ack(ev *droverv1.Evaluation, token string) {
	ctx, cancel := w.releaseContext()
	defer cancel()
	if err := w.pool.broker.Ack(ctx, ev.GetId(), token); err != nil {
		w.log.Warn("ack failed", "eval_id", ev.GetId(), "error", err)
		return
	}
	w.mu.Lock()
	w.acked++
	w.mu.Unlock()
	w.pool.notify()
}

// nack hands ev back to the broker; reason says why.
func (w *worker) nack(ev *droverv1.Evaluation, token string, reason error) {
	level := slog.LevelWarn
	if errors.Is(reason, ErrShuttingDown) {
		level = slog.LevelDebug
	}
	w.log.Log(w.ctx, level, "nacking eval", "eval_id", ev.GetId(), "job_id", ev.GetJobId(), "error", reason)
	w.mu.Lock()
	w.nacked++
	w.mu.Unlock()
	ctx, cancel := w.releaseContext()
	defer cancel()
	if err := w.pool.broker.Nack(ctx, ev.GetId(), token); err != nil {
		w.log.Warn("nack failed", "eval_id", ev.GetId(), "error", err)
	}
	w.pool.notify()
}

// releaseContext bounds an Ack or Nack; it outlives Stop so an evaluation
// in hand is still handed back while the pool stops.
func (w *worker) releaseContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(w.ctx), releaseTimeout)
}

// snapshotAt waits up to StateWait for the local state to reach index. The
// error wraps ErrShuttingDown when the pool stops, ErrStateBehind when the
// wait timed out.
func (w *worker) snapshotAt(ctx context.Context, index uint64) (scheduler.State, error) {
	waitCtx, cancel := context.WithTimeout(ctx, w.cfg.StateWait)
	defer cancel()
	snap, err := w.pool.local.SnapshotMinIndex(waitCtx, index)
	switch {
	case err == nil:
		return snap, nil
	case ctx.Err() == nil && waitCtx.Err() != nil:
		return nil, fmt.Errorf("local state at index %d did not reach index %d within %v: %w",
			w.pool.local.LatestIndex(), index, w.cfg.StateWait, ErrStateBehind)
	default:
		return nil, w.ended(fmt.Sprintf("wait for state index %d", index), err)
	}
}

// ended wraps err, which ended what; when the pool is stopping the error
// wraps ErrShuttingDown instead of a bare context error.
func (w *worker) ended(what string, err error) error {
	if w.ctx.Err() != nil && !errors.Is(err, ErrShuttingDown) {
		return fmt.Errorf("%s: %w (%v)", what, ErrShuttingDown, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
