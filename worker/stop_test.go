package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// TestStopDuringEachWait stops the pool while its worker waits somewhere
// and checks that Stop returns, nothing is left running, the evaluation in
// hand is nacked, and the errors the wait ended with wrap ErrShuttingDown.
func TestStopDuringEachWait(t *testing.T) {
	// schedErr carries what the scheduler's planner call returned.
	type setup func(h *harness, schedErr chan<- error)
	submitOnce := func(h *harness, schedErr chan<- error) {
		h.scheds.script("e1", func(ctx context.Context, _ *droverv1.Evaluation, _ scheduler.State, pl scheduler.Planner) error {
			_, _, err := pl.SubmitPlan(ctx, &droverv1.Plan{})
			schedErr <- err
			return err
		})
		h.push(eval("e1", "job1", 5), 0)
	}
	tests := []struct {
		name  string
		cfg   Config
		index uint64
		setup setup
		// reached waits until the worker is in the wait under test.
		reached func(h *harness)
		// nacked: the eval in hand must be nacked with a reason wrapping
		// ErrShuttingDown; schedErr: the scheduler's planner call must
		// fail with an error wrapping it.
		nacked, schedErr bool
	}{
		{
			name:    "dequeue",
			cfg:     Config{DequeueTimeout: time.Hour},
			reached: func(h *harness) { recv(h.t, h.broker.dequeued, "dequeue") },
		},
		{
			name: "dequeue backoff",
			cfg:  Config{BackoffBase: time.Hour},
			setup: func(h *harness, _ chan<- error) {
				h.broker.deliveries <- delivery{err: unavailable()}
			},
			reached: func(h *harness) { h.waitStatus(StatusBackoff) },
		},
		{
			name:    "paused",
			setup:   func(h *harness, _ chan<- error) { h.pool.Pause() },
			reached: func(h *harness) { h.waitStatus(StatusPaused) },
		},
		{
			name:  "state wait",
			cfg:   Config{StateWait: time.Hour},
			index: 1,
			setup: func(h *harness, _ chan<- error) {
				h.push(eval("e1", "job1", 5), 5)
			},
			reached: func(h *harness) { h.waitStatus(StatusWaitingForState) },
			nacked:  true,
		},
		{
			name:  "slow state wait",
			cfg:   Config{StateWait: time.Millisecond, SlowStateWait: time.Hour},
			index: 1,
			setup: func(h *harness, _ chan<- error) {
				h.push(eval("e1", "job1", 5), 5)
			},
			reached: func(h *harness) {
				recv(h.t, h.local.waits, "wait for the wait index")
				recv(h.t, h.broker.nacks, "nack for a state behind")
				recv(h.t, h.local.waits, "slow wait after the nack")
			},
		},
		{
			name: "process",
			setup: func(h *harness, schedErr chan<- error) {
				h.scheds.script("e1", func(ctx context.Context, _ *droverv1.Evaluation, _ scheduler.State, _ scheduler.Planner) error {
					<-ctx.Done()
					schedErr <- context.Cause(ctx)
					return ctx.Err()
				})
				h.push(eval("e1", "job1", 5), 0)
			},
			reached:  func(h *harness) { recv(h.t, h.scheds.started, "process") },
			nacked:   true,
			schedErr: true,
		},
		{
			name: "plan submission",
			setup: func(h *harness, schedErr chan<- error) {
				h.leader.submit = func(ctx context.Context, _ *droverv1.Plan) (*droverv1.PlanResult, error) {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				submitOnce(h, schedErr)
			},
			reached:  func(h *harness) { h.waitStatus(StatusSubmitting) },
			nacked:   true,
			schedErr: true,
		},
		{
			name: "plan submission backoff",
			cfg:  Config{SubmitBackoffBase: time.Hour},
			setup: func(h *harness, schedErr chan<- error) {
				h.leader.submit = func(context.Context, *droverv1.Plan) (*droverv1.PlanResult, error) {
					return nil, unavailable()
				}
				submitOnce(h, schedErr)
			},
			reached:  func(h *harness) { h.waitStatus(StatusBackoff) },
			nacked:   true,
			schedErr: true,
		},
		{
			name: "refresh wait",
			cfg:  Config{StateWait: time.Hour},
			setup: func(h *harness, schedErr chan<- error) {
				h.leader.submit = func(context.Context, *droverv1.Plan) (*droverv1.PlanResult, error) {
					return &droverv1.PlanResult{RefreshIndex: 50}, nil
				}
				submitOnce(h, schedErr)
			},
			reached: func(h *harness) {
				recv(h.t, h.scheds.started, "process")
				h.waitStatus(StatusWaitingForState)
			},
			nacked:   true,
			schedErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			index := tt.index
			if index == 0 {
				index = 10
			}
			h := newHarness(t, tt.cfg, index)
			schedErr := make(chan error, 1)
			if tt.setup != nil {
				tt.setup(h, schedErr)
			}
			h.start()
			tt.reached(h)
			h.stop()
			h.quiet()

			if tt.nacked {
				if got := recv(t, h.broker.nacks, "nack"); got != "e1" {
					t.Errorf("nacked %q, want e1", got)
				}
				errs := h.logs.errorsOf("nacking eval")
				if len(errs) != 1 || !errors.Is(errs[0], ErrShuttingDown) {
					t.Errorf("nack reason %v, want one wrapping ErrShuttingDown", errs)
				}
			}
			if tt.schedErr {
				if err := recv(t, schedErr, "scheduler's error"); !errors.Is(err, ErrShuttingDown) {
					t.Errorf("scheduler got %v, want an error wrapping ErrShuttingDown", err)
				}
			}
			if len(h.broker.acks) != 0 {
				t.Error("an eval was acked although the pool stopped before it was processed")
			}
		})
	}
}

func TestStopBeforeStartAndTwice(t *testing.T) {
	h := newHarness(t, Config{}, 10)
	h.pool.Stop()
	h.pool.Start(context.Background())
	if w := h.pool.Workers(); len(w) != 0 {
		t.Errorf("Start after Stop started workers %+v", w)
	}
	if err := h.pool.SetConfig(2, defaultSchedulers()); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("SetConfig after Stop: %v, want ErrShuttingDown", err)
	}
	h.pool.Stop()
}

func TestStartContextEndStopsWorkers(t *testing.T) {
	h := newHarness(t, Config{NumWorkers: 2}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	h.pool.Start(ctx)
	h.waitStatus(StatusRunning)
	cancel()
	h.waitFor("workers stopped", func() bool {
		for _, w := range h.pool.Workers() {
			if w.Status != StatusStopped {
				return false
			}
		}
		return true
	})
}
