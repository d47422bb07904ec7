package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestProcessAndAck(t *testing.T) {
	h := newHarness(t, Config{}, 10)
	h.scheds.script("e1", func(ctx context.Context, ev *droverv1.Evaluation, st scheduler.State, pl scheduler.Planner) error {
		if st.Index() != 10 {
			return errors.New("scheduler got a state at the wrong index")
		}
		if _, _, err := pl.SubmitPlan(ctx, &droverv1.Plan{JobId: ev.JobId}); err != nil {
			return err
		}
		done := ev.CloneVT()
		done.Status = droverv1.EvalStatus_EVAL_STATUS_COMPLETE
		if err := pl.UpdateEval(ctx, done); err != nil {
			return err
		}
		return pl.CreateEval(ctx, &droverv1.Evaluation{Id: "e1-next", JobId: ev.JobId})
	})
	h.start()
	h.push(eval("e1", "job1", 4), 5)

	if got := recv(t, h.broker.acks, "ack"); got != "e1" {
		t.Fatalf("acked %q, want e1", got)
	}
	plans := h.leader.submitted()
	if len(plans) != 1 {
		t.Fatalf("%d plans submitted, want 1", len(plans))
	}
	if p := plans[0]; p.EvalId != "e1" || p.EvalToken != "tok-e1" || p.SnapshotIndex != 10 {
		t.Errorf("plan stamped eval %q token %q snapshot %d, want e1 tok-e1 10", p.EvalId, p.EvalToken, p.SnapshotIndex)
	}
	calls := h.leader.evalCalls()
	if len(calls) != 2 {
		t.Fatalf("leader eval calls %+v, want update and create", calls)
	}
	for _, c := range calls {
		if c.token != "tok-e1" || c.ev.SnapshotIndex != 10 {
			t.Errorf("%s of eval %s: token %q snapshot %d, want tok-e1 10", c.method, c.ev.Id, c.token, c.ev.SnapshotIndex)
		}
	}
	h.waitFor("processed count 1", func() bool {
		w := h.pool.Workers()
		return len(w) == 1 && w[0].Processed == 1 && w[0].Nacked == 0 && w[0].EvalID == ""
	})
}

func TestFailedEvalIsNacked(t *testing.T) {
	tests := []struct {
		name   string
		newErr error
		script processFunc
	}{
		{
			name: "process error",
			script: func(context.Context, *droverv1.Evaluation, scheduler.State, scheduler.Planner) error {
				return errors.New("plan did not fully commit")
			},
		},
		{
			name:   "no scheduler",
			newErr: errors.New("no scheduler for this type"),
		},
		{
			name: "scheduler panics",
			script: func(context.Context, *droverv1.Evaluation, scheduler.State, scheduler.Planner) error {
				panic("bug")
			},
		},
		{
			name: "plan rejected",
			script: func(ctx context.Context, _ *droverv1.Evaluation, _ scheduler.State, pl scheduler.Planner) error {
				_, _, err := pl.SubmitPlan(ctx, &droverv1.Plan{})
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{}, 10)
			h.scheds.newErr = tt.newErr
			h.scheds.script("e1", tt.script)
			h.leader.submit = func(context.Context, *droverv1.Plan) (*droverv1.PlanResult, error) {
				return nil, status.Error(codes.PermissionDenied, "token mismatch")
			}
			h.start()
			h.push(eval("e1", "job1", 5), 0)
			if got := recv(t, h.broker.nacks, "nack"); got != "e1" {
				t.Fatalf("nacked %q, want e1", got)
			}
			h.waitFor("nacked count 1", func() bool {
				w := h.pool.Workers()
				return len(w) == 1 && w[0].Nacked == 1
			})
			if len(h.broker.acks) != 0 {
				t.Error("failed eval was acked")
			}
			if errs := h.logs.errorsOf("nacking eval"); len(errs) != 1 {
				t.Errorf("nack reasons logged: %v, want one", errs)
			}
		})
	}
}

func TestStateBehindNacksThenWaitsForState(t *testing.T) {
	h := newHarness(t, Config{StateWait: time.Millisecond, SlowStateWait: time.Hour}, 5)
	var dequeuedAt []uint64
	h.broker.onDequeue = func() { dequeuedAt = append(dequeuedAt, h.local.LatestIndex()) }
	h.start()
	h.push(eval("e1", "job1", 3), 10)

	recv(t, h.local.waits, "wait for the wait index")
	if got := recv(t, h.broker.nacks, "nack"); got != "e1" {
		t.Fatalf("nacked %q, want e1", got)
	}
	if got := recv(t, h.local.waits, "slow wait after the nack"); got != 10 {
		t.Fatalf("slow wait for index %d, want 10", got)
	}
	errs := h.logs.errorsOf("nacking eval")
	if len(errs) != 1 || !errors.Is(errs[0], ErrStateBehind) {
		t.Errorf("nack reason %v, want ErrStateBehind", errs)
	}
	h.local.set(10) // the state catches up: the worker wakes at once
	recv(t, h.broker.dequeued, "first dequeue")
	recv(t, h.broker.dequeued, "dequeue after the state caught up")
	h.pool.Stop()
	if len(dequeuedAt) < 2 || dequeuedAt[1] < 10 {
		t.Errorf("state index at each dequeue %v: dequeued again before the state caught up", dequeuedAt)
	}
}

func TestWaitsForWaitIndexBeforeScheduling(t *testing.T) {
	h := newHarness(t, Config{StateWait: time.Hour}, 5)
	h.start()
	h.push(eval("e1", "job1", 3), 8)
	h.waitStatus(StatusWaitingForState)
	if len(h.scheds.started) != 0 {
		t.Fatal("scheduled before the state reached the wait index")
	}
	h.local.set(8)
	recv(t, h.broker.acks, "ack")
}

func TestRefreshAfterPartialCommitAndNextEvalWaitsForPlan(t *testing.T) {
	h := newHarness(t, Config{StateWait: time.Hour}, 10)
	results := []*droverv1.PlanResult{
		{RefreshIndex: 11, AllocIndex: 12, RejectedNodeIds: []string{"n2"}},
		{AllocIndex: 20},
	}
	h.leader.submit = func(context.Context, *droverv1.Plan) (*droverv1.PlanResult, error) {
		res := results[0]
		results = results[1:]
		return res, nil
	}
	refreshed := make(chan uint64, 1)
	h.scheds.script("e1", func(ctx context.Context, ev *droverv1.Evaluation, _ scheduler.State, pl scheduler.Planner) error {
		_, st, err := pl.SubmitPlan(ctx, &droverv1.Plan{})
		if err != nil {
			return err
		}
		if st == nil {
			return errors.New("no refreshed state after a partial commit")
		}
		refreshed <- st.Index()
		res, st, err := pl.SubmitPlan(ctx, &droverv1.Plan{EvalUpdate: ev.CloneVT()})
		if err != nil || st != nil || res.AllocIndex != 20 {
			return errors.New("second plan should fully commit")
		}
		return pl.UpdateEval(ctx, ev)
	})
	h.start()
	h.push(eval("e1", "job1", 10), 10)

	recv(t, h.scheds.started, "process of e1")
	h.waitStatus(StatusWaitingForState) // for the refresh index
	h.local.set(12)
	if got := recv(t, refreshed, "refreshed state"); got != 12 {
		t.Errorf("refreshed state at %d, want 12 (the committed part's index)", got)
	}
	recv(t, h.broker.acks, "ack of e1")
	plans := h.leader.submitted()
	if len(plans) != 2 || plans[0].SnapshotIndex != 10 || plans[1].SnapshotIndex != 12 {
		t.Fatalf("plans %v, want snapshot indexes 10 then 12", plans)
	}
	if got := plans[1].GetEvalUpdate().GetSnapshotIndex(); got != 12 {
		t.Errorf("the outcome the second plan carries has snapshot index %d, want 12, as the plan", got)
	}
	if calls := h.leader.evalCalls(); len(calls) != 1 || calls[0].ev.SnapshotIndex != 12 {
		t.Errorf("eval update %+v, want snapshot index 12", calls)
	}

	// The next eval names an older index, but this worker's plan was
	// applied at 20: it must not schedule before its state has it.
	h.push(eval("e2", "job2", 3), 3)
	h.waitFor("e2 waiting for the state", func() bool {
		w := h.pool.Workers()[0]
		return w.EvalID == "e2" && w.Status == StatusWaitingForState
	})
	if len(h.scheds.started) != 0 {
		t.Fatal("e2 scheduled before the state reached the last plan's index")
	}
	h.local.set(20)
	if got := recv(t, h.scheds.started, "process of e2"); got != "e2" {
		t.Fatalf("processed %q, want e2", got)
	}
	recv(t, h.broker.acks, "ack of e2")
}

func TestSubmitPlanRetries(t *testing.T) {
	tests := []struct {
		name      string
		errs      []error // returned by the leader before it commits
		wantCalls int
		wantErr   bool
	}{
		{name: "unavailable twice", errs: []error{unavailable(), unavailable()}, wantCalls: 3},
		{name: "wrapped retryable", errs: []error{errors.Join(errors.New("plan queue disabled"), ErrRetryable)}, wantCalls: 2},
		{name: "not retryable", errs: []error{status.Error(codes.FailedPrecondition, "token mismatch")}, wantCalls: 1, wantErr: true},
		{name: "no error", wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{SubmitBackoffBase: time.Millisecond, SubmitBackoffLimit: 2 * time.Millisecond}, 10)
			errs := tt.errs
			h.leader.submit = func(context.Context, *droverv1.Plan) (*droverv1.PlanResult, error) {
				if len(errs) > 0 {
					err := errs[0]
					errs = errs[1:]
					return nil, err
				}
				return &droverv1.PlanResult{AllocIndex: 11}, nil
			}
			got := make(chan error, 1)
			h.scheds.script("e1", func(ctx context.Context, _ *droverv1.Evaluation, _ scheduler.State, pl scheduler.Planner) error {
				_, _, err := pl.SubmitPlan(ctx, &droverv1.Plan{})
				got <- err
				return err
			})
			h.start()
			h.push(eval("e1", "job1", 5), 0)
			err := recv(t, got, "SubmitPlan result")
			if (err != nil) != tt.wantErr {
				t.Errorf("SubmitPlan error %v, want error %v", err, tt.wantErr)
			}
			if n := len(h.leader.submitted()); n != tt.wantCalls {
				t.Errorf("leader saw %d submissions, want %d", n, tt.wantCalls)
			}
		})
	}
}

func TestDequeueErrorsBackOff(t *testing.T) {
	h := newHarness(t, Config{BackoffBase: time.Millisecond, BackoffLimit: 2 * time.Millisecond}, 10)
	h.broker.deliveries <- delivery{err: unavailable()}
	h.broker.deliveries <- delivery{err: unavailable()}
	h.push(eval("e1", "job1", 5), 0)
	h.start()
	recv(t, h.broker.acks, "ack after dequeue errors")
	if errs := h.logs.errorsOf("dequeue failed"); len(errs) != 2 {
		t.Errorf("dequeue errors logged %v, want 2", errs)
	}
}

func TestPauseParksAfterCurrentEval(t *testing.T) {
	h := newHarness(t, Config{}, 10)
	release := make(chan struct{})
	h.scheds.script("e1", func(context.Context, *droverv1.Evaluation, scheduler.State, scheduler.Planner) error {
		<-release
		return nil
	})
	violations := make(chan struct{}, 64)
	h.broker.onDequeue = func() {
		if _, _, paused := h.pool.Config(); paused {
			violations <- struct{}{}
		}
	}
	h.start()
	h.push(eval("e1", "job1", 5), 0)
	recv(t, h.scheds.started, "process of e1")
	h.pool.Pause()
	h.push(eval("e2", "job2", 5), 0)
	close(release)
	recv(t, h.broker.acks, "ack of e1 (in flight when paused)")
	h.waitStatus(StatusPaused)
	if _, _, paused := h.pool.Config(); !paused {
		t.Error("Config does not report the pool paused")
	}
	h.pool.Resume()
	if got := recv(t, h.broker.acks, "ack of e2 after resume"); got != "e2" {
		t.Fatalf("acked %q, want e2", got)
	}
	if len(violations) != 0 {
		t.Errorf("%d dequeues while paused", len(violations))
	}
}

func TestStoppingWorkerNacksWhatItDequeued(t *testing.T) {
	h := newHarness(t, Config{DequeueTimeout: time.Hour}, 10)
	h.start()
	recv(t, h.broker.dequeued, "dequeue")
	if err := h.pool.SetConfig(0, defaultSchedulers()); err != nil {
		t.Fatal(err)
	}
	h.push(eval("e1", "job1", 5), 0)
	if got := recv(t, h.broker.nacks, "nack"); got != "e1" {
		t.Fatalf("nacked %q, want e1", got)
	}
	h.waitFor("no workers", func() bool { return len(h.pool.Workers()) == 0 })
	if errs := h.logs.errorsOf("nacking eval"); len(errs) != 1 || !errors.Is(errs[0], ErrShuttingDown) {
		t.Errorf("nack reason %v, want ErrShuttingDown", errs)
	}
}
