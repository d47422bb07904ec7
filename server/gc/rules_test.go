package gc

import (
	"reflect"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestOlder(t *testing.T) {
	g := ages{now: ago(0)}
	for _, tc := range []struct {
		name string
		at   int64
		d    time.Duration
		want bool
	}{
		{"past the threshold", ago(2 * time.Hour), time.Hour, true},
		{"exactly at the threshold", ago(time.Hour), time.Hour, false},
		{"within the threshold", ago(time.Minute), time.Hour, false},
		{"zero threshold, fresh", ago(0), 0, true},
		{"zero threshold, stamped after now", ago(-time.Minute), 0, true},
		{"negative threshold", ago(0), -time.Hour, true},
		{"never stamped", 0, time.Hour, true},
	} {
		if got := g.older(tc.at, tc.d); got != tc.want {
			t.Errorf("%s: older = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAllocDisposable(t *testing.T) {
	live := &droverv1.Job{Type: service}
	stopped := &droverv1.Job{Type: service, Stop: true}
	liveBatch := &droverv1.Job{Type: batch}
	stoppedBatch := &droverv1.Job{Type: batch, Stop: true}
	alloc := func(cs droverv1.AllocClientStatus, stop bool, next string) *droverv1.Allocation {
		a := &droverv1.Allocation{ClientStatus: cs, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, NextAllocation: next}
		if stop {
			a.DesiredStatus = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP
		}
		return a
	}
	lost := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
	unknown := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
	pending := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	for _, tc := range []struct {
		name  string
		alloc *droverv1.Allocation
		job   *droverv1.Job
		want  bool
	}{
		{"running, job gone", alloc(running, true, ""), nil, false},
		{"pending, stopped", alloc(pending, true, ""), stopped, false},
		{"unknown, stopped", alloc(unknown, true, ""), stopped, false},
		{"complete, job gone", alloc(complete, false, ""), nil, true},
		{"failed, job stopped", alloc(failed, false, ""), stopped, true},
		{"complete batch, job stopped", alloc(complete, false, ""), stoppedBatch, true},
		{"complete batch, job live", alloc(complete, false, ""), liveBatch, false},
		{"complete batch, stopped, job live", alloc(complete, true, ""), liveBatch, false},
		{"failed batch, stopped, job live", alloc(failed, true, ""), liveBatch, true},
		{"complete service, stopped", alloc(complete, true, ""), live, true},
		{"complete service, desired run", alloc(complete, false, ""), live, true},
		{"failed, waiting to be rescheduled", alloc(failed, false, ""), live, false},
		{"failed, replaced", alloc(failed, false, "next"), live, true},
		{"failed batch, waiting to be rescheduled", alloc(failed, false, ""), liveBatch, false},
		{"lost, not yet stopped", alloc(lost, false, ""), live, false},
		{"lost, replaced", alloc(lost, false, "next"), live, true},
		{"lost, stopped", alloc(lost, true, ""), live, true},
	} {
		if got := allocDisposable(tc.alloc, tc.job); got != tc.want {
			t.Errorf("%s: disposable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEvalExpired(t *testing.T) {
	g := ages{th: DefaultThresholds(), now: ago(0)}
	for _, tc := range []struct {
		name   string
		status droverv1.EvalStatus
		typ    droverv1.JobType
		age    time.Duration
		want   bool
	}{
		{"complete, old", evalComplete, service, mid, true},
		{"failed, old", evalFailed, service, mid, true},
		{"canceled, old", evalCanceled, service, mid, true},
		{"pending, old", evalPending, service, old, false},
		{"blocked, old", evalBlocked, service, old, false},
		{"complete, fresh", evalComplete, service, fresh, false},
		{"batch, past eval but not batch threshold", evalComplete, batch, mid, false},
		{"batch, past batch threshold", evalComplete, batch, old, true},
	} {
		ev := &droverv1.Evaluation{Status: tc.status, Type: tc.typ, ModifyTime: ago(tc.age)}
		if got := g.evalExpired(ev); got != tc.want {
			t.Errorf("%s: expired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeExpired(t *testing.T) {
	g := ages{th: DefaultThresholds(), now: ago(0)}
	stoppedRunning := &droverv1.Allocation{ClientStatus: running, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP}
	completeRun := &droverv1.Allocation{ClientStatus: complete, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN}
	live := &droverv1.Allocation{ClientStatus: running, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN}
	for _, tc := range []struct {
		name   string
		status droverv1.NodeStatus
		age    time.Duration
		allocs []*droverv1.Allocation
		want   bool
	}{
		{"down, old, empty", down, old, nil, true},
		{"down, old, terminal either side", down, old, []*droverv1.Allocation{stoppedRunning, completeRun}, true},
		{"down, old, a live allocation", down, old, []*droverv1.Allocation{completeRun, live}, false},
		{"down, fresh", down, mid, nil, false},
		{"disconnected, old", disconnected, old, nil, false},
		{"ready, old", ready, old, nil, false},
	} {
		n := &droverv1.Node{Status: tc.status, StatusUpdatedAt: ago(tc.age)}
		if got := g.nodeExpired(n, tc.allocs); got != tc.want {
			t.Errorf("%s: expired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestJobExpired(t *testing.T) {
	g := ages{th: DefaultThresholds(), now: ago(0)}
	dead := droverv1.JobStatus_JOB_STATUS_DEAD
	runningStatus := droverv1.JobStatus_JOB_STATUS_RUNNING
	done := &droverv1.Allocation{ClientStatus: complete}
	stoppedRunning := &droverv1.Allocation{ClientStatus: running, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP}
	evalOf := func(s droverv1.EvalStatus) *droverv1.Evaluation { return &droverv1.Evaluation{Status: s} }
	for _, tc := range []struct {
		name   string
		job    *droverv1.Job
		allocs []*droverv1.Allocation
		evals  []*droverv1.Evaluation
		want   bool
	}{
		{"stopped, old, done", &droverv1.Job{Type: service, Stop: true, SubmitTime: ago(old)}, []*droverv1.Allocation{done}, []*droverv1.Evaluation{evalOf(evalComplete)}, true},
		{"stopped, fresh", &droverv1.Job{Type: service, Stop: true, SubmitTime: ago(mid)}, nil, nil, false},
		{"stopped, allocation still running", &droverv1.Job{Type: service, Stop: true, SubmitTime: ago(old)}, []*droverv1.Allocation{stoppedRunning}, nil, false},
		{"stopped, evaluation pending", &droverv1.Job{Type: service, Stop: true, SubmitTime: ago(old)}, nil, []*droverv1.Evaluation{evalOf(evalPending)}, false},
		{"stopped, evaluation blocked", &droverv1.Job{Type: service, Stop: true, SubmitTime: ago(old)}, nil, []*droverv1.Evaluation{evalOf(evalBlocked)}, false},
		{"batch dead, old", &droverv1.Job{Type: batch, Status: dead, SubmitTime: ago(old)}, []*droverv1.Allocation{done}, nil, true},
		{"batch running, old", &droverv1.Job{Type: batch, Status: runningStatus, SubmitTime: ago(old)}, nil, nil, false},
		{"service dead, not stopped", &droverv1.Job{Type: service, Status: dead, SubmitTime: ago(old)}, nil, nil, false},
	} {
		if got := g.jobExpired(tc.job, tc.allocs, tc.evals); got != tc.want {
			t.Errorf("%s: expired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPrunableVersions(t *testing.T) {
	seq := func(n uint64) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(i)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		versions []uint64
		current  uint64
		inUse    []uint64
		want     []uint64
	}{
		{"no more than kept", seq(KeepJobVersions), KeepJobVersions - 1, nil, nil},
		{"one beyond", seq(KeepJobVersions + 1), KeepJobVersions, nil, []uint64{0}},
		{"in use kept", seq(10), 9, []uint64{1}, []uint64{0, 2, 3}},
		{"unordered input", []uint64{9, 3, 0, 8, 1, 7, 2, 6, 5, 4}, 9, nil, []uint64{0, 1, 2, 3}},
		{"current is never pruned", []uint64{0, 10, 11, 12, 13, 14, 15}, 0, nil, []uint64{}},
	} {
		inUse := make(map[uint64]bool)
		for _, v := range tc.inUse {
			inUse[v] = true
		}
		got := prunableVersions(tc.versions, tc.current, inUse)
		if len(got) == 0 && len(tc.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: prunable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
