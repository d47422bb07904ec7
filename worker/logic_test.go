package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestIsRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{status.Error(codes.Unavailable, "no leader"), true},
		{fmt.Errorf("submit: %w", status.Error(codes.Unavailable, "no leader")), true},
		{status.Error(codes.FailedPrecondition, "bad token"), false},
		{status.Error(codes.DeadlineExceeded, "slow"), false},
		{fmt.Errorf("plan queue disabled: %w", ErrRetryable), true},
		{context.Canceled, false},
	}
	for _, tt := range tests {
		if got := IsRetryable(tt.err); got != tt.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestMinIndex(t *testing.T) {
	tests := []struct {
		name                              string
		waitIndex, evalWait, modify, plan uint64
		want                              uint64
	}{
		{"broker's wait index", 7, 0, 5, 0, 7},
		{"falls back to modify index", 0, 0, 5, 0, 5},
		{"eval's own wait index", 0, 6, 5, 0, 6},
		{"own plan is newer", 7, 0, 5, 12, 12},
		{"nothing known", 0, 0, 0, 0, 1},
	}
	for _, tt := range tests {
		ev := &droverv1.Evaluation{WaitIndex: tt.evalWait, ModifyIndex: tt.modify}
		if got := minIndex(ev, tt.waitIndex, tt.plan); got != tt.want {
			t.Errorf("%s: minIndex = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestValidateWorkers(t *testing.T) {
	service, batch, system := droverv1.JobType_JOB_TYPE_SERVICE, droverv1.JobType_JOB_TYPE_BATCH, droverv1.JobType_JOB_TYPE_SYSTEM
	tests := []struct {
		name       string
		num        int
		schedulers []droverv1.JobType
		want       []droverv1.JobType
		wantErr    bool
	}{
		{"all", 2, []droverv1.JobType{system, service, batch}, []droverv1.JobType{service, batch, system}, false},
		{"duplicates", 1, []droverv1.JobType{batch, batch}, []droverv1.JobType{batch}, false},
		{"zero workers", 0, []droverv1.JobType{service}, []droverv1.JobType{service}, false},
		{"max workers", MaxWorkers(), []droverv1.JobType{service}, []droverv1.JobType{service}, false},
		{"too many workers", MaxWorkers() + 1, []droverv1.JobType{service}, nil, true},
		{"negative", -1, []droverv1.JobType{service}, nil, true},
		{"no schedulers", 1, nil, nil, true},
		{"unspecified type", 1, []droverv1.JobType{droverv1.JobType_JOB_TYPE_UNSPECIFIED}, nil, true},
		{"unknown type", 1, []droverv1.JobType{service, 42}, nil, true},
	}
	for _, tt := range tests {
		got, err := validateWorkers(tt.num, tt.schedulers)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("%s: validateWorkers = %v, %v; want %v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name        string
		in          Config
		wantNum     int
		wantSched   []droverv1.JobType
		wantProblem bool
	}{
		{"zero", Config{}, runtime.NumCPU(), defaultSchedulers(), false},
		{"set", Config{NumWorkers: 1, Schedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_BATCH}}, 1, []droverv1.JobType{droverv1.JobType_JOB_TYPE_BATCH}, false},
		{"too many", Config{NumWorkers: MaxWorkers() + 5}, MaxWorkers(), defaultSchedulers(), true},
		{"bad scheduler", Config{Schedulers: []droverv1.JobType{0}}, runtime.NumCPU(), defaultSchedulers(), true},
	}
	for _, tt := range tests {
		got, problem := tt.in.withDefaults()
		if got.NumWorkers != tt.wantNum || !slices.Equal(got.Schedulers, tt.wantSched) || (problem != nil) != tt.wantProblem {
			t.Errorf("%s: %d %v problem %v; want %d %v problem %v", tt.name, got.NumWorkers, got.Schedulers, problem, tt.wantNum, tt.wantSched, tt.wantProblem)
		}
		if got.DequeueTimeout != DefaultDequeueTimeout || got.StateWait != DefaultStateWait || got.SlowStateWait != DefaultSlowStateWait ||
			got.BackoffBase != DefaultBackoffBase || got.BackoffLimit != DefaultBackoffLimit ||
			got.SubmitBackoffBase != DefaultSubmitBackoffBase || got.SubmitBackoffLimit != DefaultSubmitBackoffLimit || got.Logger == nil {
			t.Errorf("%s: defaults not filled: %+v", tt.name, got)
		}
	}
}
