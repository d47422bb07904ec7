package worker

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// delivery is what one Dequeue call of the fake broker hands out.
type delivery struct {
	ev        *droverv1.Evaluation
	token     string
	waitIndex uint64
	err       error
}

// fakeBroker hands out the deliveries the test pushes and reports acks and
// nacks on channels.
type fakeBroker struct {
	deliveries chan delivery
	dequeued   chan struct{} // one per Dequeue call, dropped when full
	acks       chan string
	nacks      chan string
	inFlight   atomic.Int32

	mu         sync.Mutex
	calls      int
	schedulers []droverv1.JobType // of the last call
	// onDequeue, when set, runs at the start of every Dequeue.
	onDequeue func()
}

func newFakeBroker() *fakeBroker {
	return &fakeBroker{
		deliveries: make(chan delivery, 16),
		dequeued:   make(chan struct{}, 64),
		acks:       make(chan string, 64),
		nacks:      make(chan string, 64),
	}
}

func (b *fakeBroker) Dequeue(ctx context.Context, schedulers []droverv1.JobType, timeout time.Duration) (*droverv1.Evaluation, string, uint64, error) {
	b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	b.mu.Lock()
	b.calls++
	b.schedulers = slices.Clone(schedulers)
	hook := b.onDequeue
	b.mu.Unlock()
	if hook != nil {
		hook()
	}
	select {
	case b.dequeued <- struct{}{}:
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case d := <-b.deliveries:
		return d.ev, d.token, d.waitIndex, d.err
	case <-ctx.Done():
		return nil, "", 0, status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		return nil, "", 0, nil
	}
}

func (b *fakeBroker) Ack(_ context.Context, evalID, _ string) error {
	b.acks <- evalID
	return nil
}

func (b *fakeBroker) Nack(ctx context.Context, evalID, _ string) error {
	if ctx.Err() != nil {
		return errors.New("nack with a dead context")
	}
	b.nacks <- evalID
	return nil
}

func (b *fakeBroker) lastSchedulers() []droverv1.JobType {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.schedulers
}

// leaderCall is one call of the fake leader's eval methods.
type leaderCall struct {
	method string
	ev     *droverv1.Evaluation
	token  string
}

// fakeLeader answers plans with submit (nil: everything commits at index
// 100) and records every call.
type fakeLeader struct {
	submit   func(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, error)
	inFlight atomic.Int32

	mu    sync.Mutex
	plans []*droverv1.Plan
	evals []leaderCall
}

func (l *fakeLeader) SubmitPlan(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, error) {
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	l.mu.Lock()
	l.plans = append(l.plans, plan.CloneVT())
	l.mu.Unlock()
	if l.submit == nil {
		return &droverv1.PlanResult{NodePlans: plan.NodePlans, AllocIndex: 100}, nil
	}
	return l.submit(ctx, plan)
}

func (l *fakeLeader) record(method string, ev *droverv1.Evaluation, token string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evals = append(l.evals, leaderCall{method, ev, token})
	return nil
}

func (l *fakeLeader) UpdateEval(_ context.Context, ev *droverv1.Evaluation, token string) error {
	return l.record("update", ev, token)
}

func (l *fakeLeader) CreateEval(_ context.Context, ev *droverv1.Evaluation, token string) error {
	return l.record("create", ev, token)
}

func (l *fakeLeader) ReblockEval(_ context.Context, ev *droverv1.Evaluation, token string) error {
	return l.record("reblock", ev, token)
}

func (l *fakeLeader) submitted() []*droverv1.Plan {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.plans)
}

func (l *fakeLeader) evalCalls() []leaderCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evals)
}

// fakeLocal is a state store whose index the test drives; waiters wake on
// every change.
type fakeLocal struct {
	inFlight atomic.Int32
	waits    chan uint64 // the index of each SnapshotMinIndex call, dropped when full

	mu      sync.Mutex
	index   uint64
	changed chan struct{}
}

func newFakeLocal(index uint64) *fakeLocal {
	return &fakeLocal{index: index, changed: make(chan struct{}), waits: make(chan uint64, 64)}
}

func (l *fakeLocal) set(index uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.index = index
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *fakeLocal) LatestIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.index
}

func (l *fakeLocal) SnapshotMinIndex(ctx context.Context, index uint64) (scheduler.State, error) {
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	select {
	case l.waits <- index:
	default:
	}
	for {
		l.mu.Lock()
		at, changed := l.index, l.changed
		l.mu.Unlock()
		if at >= index {
			return fakeState{index: at}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fakeState is an empty cluster at an index.
type fakeState struct{ index uint64 }

func (s fakeState) Index() uint64                 { return s.index }
func (fakeState) NodeByID(string) *droverv1.Node  { return nil }
func (fakeState) Nodes() iter.Seq[*droverv1.Node] { return func(func(*droverv1.Node) bool) {} }
func (fakeState) NodesWithAllocs() iter.Seq2[*droverv1.Node, []*droverv1.Allocation] {
	return func(func(*droverv1.Node, []*droverv1.Allocation) bool) {}
}
func (fakeState) JobByID(string) *droverv1.Job                         { return nil }
func (fakeState) JobVersion(string, uint64) *droverv1.Job              { return nil }
func (fakeState) AllocsByJob(string) ([]*droverv1.Allocation, uint64)  { return nil, 0 }
func (fakeState) AllocsByNode(string) ([]*droverv1.Allocation, uint64) { return nil, 0 }
func (fakeState) NodeAllocsShared(string) []*droverv1.Allocation       { return nil }
func (fakeState) AllocIPHeld(string) bool                              { return false }
func (fakeState) LatestDeployment(string) *droverv1.Deployment         { return nil }
func (fakeState) NeverUsedIP(from, _ netip.Addr) (netip.Addr, bool)    { return from, true }
func (fakeState) ReleasedIPs() func() (netip.Addr, uint64, bool) {
	return func() (netip.Addr, uint64, bool) { return netip.Addr{}, 0, false }
}
func (fakeState) EvalByID(string) *droverv1.Evaluation { return nil }

// processFunc is what a fake scheduler does for one evaluation.
type processFunc func(ctx context.Context, ev *droverv1.Evaluation, st scheduler.State, planner scheduler.Planner) error

// fakeSchedulers makes schedulers that run the test's script for an
// evaluation id (none: succeed) and report each Process start.
type fakeSchedulers struct {
	started chan string
	newErr  error

	mu      sync.Mutex
	scripts map[string]processFunc
}

func newFakeSchedulers() *fakeSchedulers {
	return &fakeSchedulers{started: make(chan string, 64), scripts: map[string]processFunc{}}
}

func (f *fakeSchedulers) script(evalID string, fn processFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[evalID] = fn
}

func (f *fakeSchedulers) newScheduler(_ droverv1.JobType, st scheduler.State, planner scheduler.Planner) (scheduler.Scheduler, error) {
	if f.newErr != nil {
		return nil, f.newErr
	}
	return &fakeScheduler{f: f, st: st, planner: planner}, nil
}

type fakeScheduler struct {
	f       *fakeSchedulers
	st      scheduler.State
	planner scheduler.Planner
}

func (s *fakeScheduler) Process(ctx context.Context, ev *droverv1.Evaluation) error {
	s.f.started <- ev.GetId()
	s.f.mu.Lock()
	fn := s.f.scripts[ev.GetId()]
	s.f.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(ctx, ev, s.st, s.planner)
}

// watcher turns the pool's change notifications into a condition tests
// wait on.
type watcher struct {
	mu      sync.Mutex
	changed chan struct{}
}

func newWatcher() *watcher { return &watcher{changed: make(chan struct{})} }

func (w *watcher) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *watcher) current() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// logRecorder keeps every log record.
type logRecorder struct {
	mu      *sync.Mutex
	records *[]slog.Record
	attrs   []slog.Attr
}

func newLogRecorder() *logRecorder {
	return &logRecorder{mu: &sync.Mutex{}, records: &[]slog.Record{}}
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(r.attrs...)
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.records = append(*r.records, rec)
	return nil
}

func (r *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{mu: r.mu, records: r.records, attrs: append(slices.Clone(r.attrs), attrs...)}
}

func (r *logRecorder) WithGroup(string) slog.Handler { return r }

// errorsOf returns the "error" attributes of the records with message msg.
func (r *logRecorder) errorsOf(msg string) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, rec := range *r.records {
		if rec.Message != msg {
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && a.Key == "error" {
				errs = append(errs, err)
			}
			return true
		})
	}
	return errs
}

// unavailable is the error a server returns while there is no leader.
func unavailable() error { return status.Error(codes.Unavailable, "no cluster leader") }
