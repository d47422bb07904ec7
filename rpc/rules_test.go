package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	initializing = droverv1.NodeStatus_NODE_STATUS_INITIALIZING
	ready        = droverv1.NodeStatus_NODE_STATUS_READY
	down         = droverv1.NodeStatus_NODE_STATUS_DOWN
	disconnected = droverv1.NodeStatus_NODE_STATUS_DISCONNECTED
)

func TestNextStatus(t *testing.T) {
	tests := []struct {
		name             string
		stored           droverv1.NodeStatus
		liveAlloc        bool
		missed, reported uint64
		want             droverv1.NodeStatus
	}{
		{"ready stays ready", ready, true, 0, 0, ready},
		{"new node without allocs", initializing, false, 0, 0, ready},
		{"initializing with allocs, never reported", initializing, true, 0, 0, initializing},
		{"initializing, reported before the miss", initializing, true, 10, 5, initializing},
		{"initializing, reported at the miss", initializing, true, 10, 10, initializing},
		{"initializing, reported after the miss", initializing, true, 10, 11, ready},
		{"initializing, allocs all terminal", initializing, false, 10, 5, ready},
		{"down comes back initializing", down, false, 10, 0, initializing},
		{"disconnected comes back initializing", disconnected, true, 10, 11, initializing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := state.NewStateStore()
			if err != nil {
				t.Fatal(err)
			}
			n := mock.Node()
			if res, _, err := st.UpsertNodes(1, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n.CloneVT()}}); err != nil || res.Errors[0] != nil {
				t.Fatal(err, res)
			}
			job := mock.Job(1)
			ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
			if _, _, err := st.UpsertJob(2, &droverv1.JobRegisterEntry{Job: job.CloneVT(), Eval: ev}); err != nil {
				t.Fatal(err)
			}
			a := mock.Alloc(n, job, 0)
			if !tt.liveAlloc {
				a.DesiredStatus = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP
			}
			if _, err := st.UpsertPlanResults(3, &droverv1.PlanResultEntry{Allocations: []*droverv1.Allocation{a}}); err != nil {
				t.Fatal(err)
			}
			node := st.Snapshot().NodeByID(n.GetId()).CloneVT()
			node.Status, node.LastMissedHeartbeatIndex, node.LastAllocUpdateIndex = tt.stored, tt.missed, tt.reported
			if got := nextStatus(node, st.Snapshot()); got != tt.want {
				t.Errorf("nextStatus = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestStatusChangeNeedsEvals(t *testing.T) {
	tests := []struct {
		from, to droverv1.NodeStatus
		want     bool
	}{
		{initializing, ready, true},
		{ready, ready, true},
		{down, initializing, false},
		{disconnected, initializing, true},
		{ready, disconnected, true},
		{ready, down, true},
		{disconnected, down, true},
		{ready, initializing, false},
	}
	for _, tt := range tests {
		if got := statusChangeNeedsEvals(tt.from, tt.to); got != tt.want {
			t.Errorf("%s -> %s: %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}

func TestReportTrigger(t *testing.T) {
	const (
		pending  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
		running  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
		complete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
		failed   = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
		unknown  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
		service  = droverv1.JobType_JOB_TYPE_SERVICE
		batch    = droverv1.JobType_JOB_TYPE_BATCH
		none     = droverv1.EvalTrigger_EVAL_TRIGGER_UNSPECIFIED
	)
	tests := []struct {
		name     string
		stored   droverv1.AllocClientStatus
		stopped  bool // desired stop
		jobType  droverv1.JobType
		jobStop  bool
		reported droverv1.AllocClientStatus
		want     droverv1.EvalTrigger
	}{
		{"running report", pending, false, service, false, running, none},
		{"service failed", running, false, service, false, failed, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE},
		{"batch failed", running, false, batch, false, failed, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE},
		{"service completed while wanted", running, false, service, false, complete, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP},
		{"batch completed", running, false, batch, false, complete, none},
		{"stopped allocation completed", running, true, service, false, complete, none},
		{"unknown is back", unknown, false, service, false, running, droverv1.EvalTrigger_EVAL_TRIGGER_RECONNECT},
		{"job stopped", running, false, service, true, failed, none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := mock.Job(1)
			job.Type, job.Stop = tt.jobType, tt.jobStop
			a := mock.Alloc(mock.Node(), job, 0)
			a.ClientStatus = tt.stored
			if tt.stopped {
				a.DesiredStatus = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP
			}
			lookups := 0
			got, ok := reportTrigger(a, tt.reported, func() *droverv1.Job { lookups++; return job })
			if ok != (tt.want != none) || got != tt.want {
				t.Errorf("trigger = %s (%v), want %s", got, ok, tt.want)
			}
			// Pending and running reports are nearly all reports: they
			// must not cost a job lookup.
			if tt.reported == running && tt.stored != unknown && lookups != 0 {
				t.Errorf("a running report looked its job up %d times", lookups)
			}
		})
	}
	if _, ok := reportTrigger(mock.Alloc(mock.Node(), mock.Job(1), 0), failed, func() *droverv1.Job { return nil }); ok {
		t.Errorf("an allocation of a purged job triggered an evaluation")
	}
}

func TestBlockingWait(t *testing.T) {
	tests := []struct {
		requested time.Duration
		min, max  time.Duration
	}{
		{0, maxBlockingWait, maxBlockingWait + maxBlockingWait/16},
		{-time.Second, maxBlockingWait, maxBlockingWait + maxBlockingWait/16},
		{time.Hour, maxBlockingWait, maxBlockingWait + maxBlockingWait/16},
		{16 * time.Second, 16 * time.Second, 17 * time.Second},
		{time.Nanosecond, time.Nanosecond, 2 * time.Nanosecond},
	}
	for _, tt := range tests {
		for range 50 {
			if got := blockingWait(tt.requested); got < tt.min || got > tt.max {
				t.Fatalf("blockingWait(%s) = %s, want in [%s, %s]", tt.requested, got, tt.min, tt.max)
			}
		}
	}
}

func TestToStatus(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	tests := []struct {
		err  error
		want codes.Code
	}{
		{&droverv1.ValidationError{Violations: []*droverv1.FieldViolation{{Field: "f", Description: "d"}}}, codes.InvalidArgument},
		{fmt.Errorf("node x: %w", state.ErrNotFound), codes.NotFound},
		{fmt.Errorf("apply: %w", state.ErrSecretMismatch), codes.PermissionDenied},
		{fmt.Errorf("x: %w", errPermissionDenied), codes.PermissionDenied},
		{fmt.Errorf("x: %w", ErrFailedPrecondition), codes.FailedPrecondition},
		{fmt.Errorf("x: %w", state.ErrConflict), codes.Unavailable},
		{fmt.Errorf("x: %w", ErrUnavailable), codes.Unavailable},
		{events.ErrSubscriptionLagged, codes.ResourceExhausted},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{status.Error(codes.Aborted, "kept"), codes.Aborted},
		{errors.New("surprise"), codes.Internal},
	}
	for _, tt := range tests {
		got := toStatus(tt.err, logger)
		if status.Code(got) != tt.want {
			t.Errorf("%v -> %s, want %s", tt.err, status.Code(got), tt.want)
		}
		if tt.want == codes.Unavailable && len(status.Convert(got).Details()) == 0 {
			t.Errorf("%v: UNAVAILABLE without a retry hint", tt.err)
		}
	}
}

func TestCodecFallsBackForStandardMessages(t *testing.T) {
	var c Codec
	for _, msg := range []proto.Message{
		&droverv1.RegisterNodeRequest{Node: mock.Node()},                            // vtprotobuf
		&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, // standard runtime only
	} {
		data, err := c.Marshal(msg)
		if err != nil {
			t.Fatalf("marshal %T: %v", msg, err)
		}
		got := msg.ProtoReflect().New().Interface()
		if err := c.Unmarshal(data, got); err != nil {
			t.Fatalf("unmarshal %T: %v", msg, err)
		}
		if !proto.Equal(msg, got) {
			t.Errorf("%T did not round-trip", msg)
		}
	}
	if _, err := c.Marshal("not a message"); err == nil {
		t.Errorf("marshalling a string succeeded")
	}
}
