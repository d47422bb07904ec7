package worker

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Defaults, after the reference servers (Nomad's values, where both have the knob).
const (
	DefaultDequeueTimeout     = 500 * time.Millisecond
	DefaultStateWait          = 5 * time.Second
	DefaultSlowStateWait      = 50 * time.Second
	DefaultBackoffBase        = 20 * time.Millisecond
	DefaultBackoffLimit       = 10 * time.Second
	DefaultSubmitBackoffBase  = 500 * time.Millisecond
	DefaultSubmitBackoffLimit = 10 * time.Second
)

// dequeueErrGrace is how old a worker must be before its dequeue errors are
// logged above debug: right after start (and during elections) the leader
// is often not known yet.
const dequeueErrGrace = 10 * time.Second

// releaseTimeout bounds an Ack or Nack. They run detached from the pool's
// context so that an evaluation is still handed back while stopping.
const releaseTimeout = 5 * time.Second

// Config tunes a worker pool. Zero fields take the defaults.
type Config struct {
	// NumWorkers is how many workers run; zero or negative means
	// runtime.NumCPU(), more than MaxWorkers() means MaxWorkers().
	NumWorkers int
	// Schedulers are the evaluation types the workers dequeue; empty means
	// service, batch and system.
	Schedulers []droverv1.JobType
	// DequeueTimeout is how long one Dequeue call waits for an evaluation.
	DequeueTimeout time.Duration
	// StateWait bounds the wait for the local state to reach an
	// evaluation's wait index (and a plan's refresh index).
	StateWait time.Duration
	// SlowStateWait is how much longer a worker that nacked because its
	// state was behind waits for it before dequeuing again; it wakes early
	// once the state has caught up.
	SlowStateWait time.Duration
	// BackoffBase and BackoffLimit shape the backoff after Dequeue errors:
	// base doubling per failure up to the limit.
	BackoffBase, BackoffLimit time.Duration
	// SubmitBackoffBase and SubmitBackoffLimit shape the backoff between
	// retries of a plan submission that failed with a retryable error.
	SubmitBackoffBase, SubmitBackoffLimit time.Duration
	// Logger receives the pool's logs; nil discards them.
	Logger *slog.Logger
	// Observer receives step durations for metrics; nil observes nothing.
	Observer Observer
	// ServerID names this server in logs.
	ServerID string
}

// MaxWorkers is the largest number of workers a pool runs: four per CPU.
// Scheduling is CPU-bound, but a worker also spends time waiting on the
// leader (dequeue, plan submission), so a few more than the CPUs can pay
// off on a follower; beyond that they only contend.
func MaxWorkers() int { return 4 * runtime.NumCPU() }

// defaultSchedulers are the evaluation types enabled unless configured.
func defaultSchedulers() []droverv1.JobType {
	return []droverv1.JobType{
		droverv1.JobType_JOB_TYPE_SERVICE,
		droverv1.JobType_JOB_TYPE_BATCH,
		droverv1.JobType_JOB_TYPE_SYSTEM,
	}
}

// withDefaults fills the zero fields of c and brings NumWorkers and
// Schedulers into range; it returns why it had to replace a value the
// caller did set, if it did.
func (c Config) withDefaults() (Config, error) {
	var problem error
	switch {
	case c.NumWorkers <= 0:
		c.NumWorkers = runtime.NumCPU()
	case c.NumWorkers > MaxWorkers():
		problem = fmt.Errorf("num workers %d above the maximum %d", c.NumWorkers, MaxWorkers())
		c.NumWorkers = MaxWorkers()
	}
	if len(c.Schedulers) == 0 {
		c.Schedulers = defaultSchedulers()
	} else if s, err := normalizeSchedulers(c.Schedulers); err != nil {
		problem = err
		c.Schedulers = defaultSchedulers()
	} else {
		c.Schedulers = s
	}
	defaultDuration(&c.DequeueTimeout, DefaultDequeueTimeout)
	defaultDuration(&c.StateWait, DefaultStateWait)
	defaultDuration(&c.SlowStateWait, DefaultSlowStateWait)
	defaultDuration(&c.BackoffBase, DefaultBackoffBase)
	defaultDuration(&c.BackoffLimit, DefaultBackoffLimit)
	defaultDuration(&c.SubmitBackoffBase, DefaultSubmitBackoffBase)
	defaultDuration(&c.SubmitBackoffLimit, DefaultSubmitBackoffLimit)
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, problem
}

func defaultDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// validateWorkers checks a run-time configuration change and returns the
// scheduler list in canonical form.
func validateWorkers(num int, schedulers []droverv1.JobType) ([]droverv1.JobType, error) {
	if num < 0 || num > MaxWorkers() {
		return nil, fmt.Errorf("worker: num workers %d out of range 0..%d", num, MaxWorkers())
	}
	return normalizeSchedulers(schedulers)
}

// normalizeSchedulers checks that every type is service, batch or system
// and that there is at least one, and returns them deduplicated in enum
// order.
func normalizeSchedulers(schedulers []droverv1.JobType) ([]droverv1.JobType, error) {
	if len(schedulers) == 0 {
		return nil, fmt.Errorf("worker: no scheduler types enabled")
	}
	out := make([]droverv1.JobType, 0, len(schedulers))
	for _, typ := range schedulers {
		if !slices.Contains(defaultSchedulers(), typ) {
			return nil, fmt.Errorf("worker: unknown scheduler type %v", typ)
		}
		out = append(out, typ)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
