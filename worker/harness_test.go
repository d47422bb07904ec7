package worker

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// testTimeout bounds every wait of a test.
const testTimeout = 10 * time.Second

// harness is a pool over fakes.
type harness struct {
	t      *testing.T
	pool   *Pool
	broker *fakeBroker
	leader *fakeLeader
	local  *fakeLocal
	scheds *fakeSchedulers
	watch  *watcher
	logs   *logRecorder
	// goroutines is the count before the pool started.
	goroutines int
}

// newHarness makes a pool of cfg (one worker unless set; short dequeue
// timeout) over a local state at index.
func newHarness(t *testing.T, cfg Config, index uint64) *harness {
	t.Helper()
	h := &harness{
		t:      t,
		broker: newFakeBroker(),
		leader: &fakeLeader{},
		local:  newFakeLocal(index),
		scheds: newFakeSchedulers(),
		watch:  newWatcher(),
		logs:   newLogRecorder(),
	}
	if cfg.NumWorkers == 0 {
		cfg.NumWorkers = 1
	}
	if cfg.DequeueTimeout == 0 {
		cfg.DequeueTimeout = 20 * time.Millisecond
	}
	cfg.Logger = slog.New(h.logs)
	cfg.ServerID = "s1"
	h.pool = NewPool(cfg, h.broker, h.leader, h.local, h.scheds.newScheduler)
	h.pool.onChange = h.watch.notify
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	h.goroutines = runtime.NumGoroutine()
	h.pool.Start(context.Background())
}

// stop stops the pool and fails the test if Stop does not return.
func (h *harness) stop() {
	h.t.Helper()
	done := make(chan struct{})
	go func() {
		h.pool.Stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		h.t.Fatalf("Stop did not return; workers %+v", h.pool.Workers())
	}
}

// push queues one evaluation for the broker to hand out.
func (h *harness) push(ev *droverv1.Evaluation, waitIndex uint64) {
	h.broker.deliveries <- delivery{ev: ev, token: "tok-" + ev.GetId(), waitIndex: waitIndex}
}

// waitFor waits until cond holds, re-checking on every worker change.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		changed := h.watch.current()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			h.t.Fatalf("timed out waiting for %s; workers %+v", what, h.pool.Workers())
		}
	}
}

// waitStatus waits until some worker has status s.
func (h *harness) waitStatus(s Status) {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("a worker %s", s), func() bool {
		for _, w := range h.pool.Workers() {
			if w.Status == s {
				return true
			}
		}
		return false
	})
}

// quiet checks, after Stop, that every worker stopped, no call into a fake
// is still running and the pool's goroutines are gone.
func (h *harness) quiet() {
	h.t.Helper()
	for _, w := range h.pool.Workers() {
		if w.Status != StatusStopped {
			h.t.Errorf("worker %s is %s after Stop", w.ID, w.Status)
		}
	}
	if n := h.broker.inFlight.Load() + h.leader.inFlight.Load() + h.local.inFlight.Load(); n != 0 {
		h.t.Errorf("%d calls into fakes still running after Stop", n)
	}
	// Workers have returned (Stop waited for them); their goroutines may
	// need a moment to be reaped.
	deadline := time.Now().Add(testTimeout)
	for runtime.NumGoroutine() > h.goroutines {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d goroutines after Stop, %d before Start", runtime.NumGoroutine(), h.goroutines)
		}
		runtime.Gosched()
	}
}

// recv receives from ch or fails the test after testTimeout.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// eval is a service evaluation of a job.
func eval(id, jobID string, modifyIndex uint64) *droverv1.Evaluation {
	return &droverv1.Evaluation{
		Id:          id,
		JobId:       jobID,
		Type:        droverv1.JobType_JOB_TYPE_SERVICE,
		Status:      droverv1.EvalStatus_EVAL_STATUS_PENDING,
		ModifyIndex: modifyIndex,
	}
}
