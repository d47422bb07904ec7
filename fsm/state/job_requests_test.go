package state

import (
	"errors"
	"maps"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const retention = int64(JobRequestRetention)

// registerAt registers j with request id at time at and returns the result.
func (f *fixture) registerAt(j *droverv1.Job, requestID string, at int64) (*droverv1.JobRequestResult, []Change) {
	f.t.Helper()
	res, changes, err := f.s.UpsertJob(f.next(), &droverv1.JobRegisterEntry{
		Job: j.CloneVT(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), SubmittedAt: at, RequestId: requestID,
	})
	if err != nil {
		f.t.Fatalf("register job %s (request %q): %v", j.GetId(), requestID, err)
	}
	return res, changes
}

func TestJobRequestReplayAppliesNothing(t *testing.T) {
	tests := []struct {
		name string
		// first and retry apply one write each with request id "r1"; the
		// retry carries other content (another evaluation, another spec).
		first, retry func(f *fixture, j *droverv1.Job) (*droverv1.JobRequestResult, []Change, error)
	}{
		{
			name: "register",
			first: func(f *fixture, j *droverv1.Job) (*droverv1.JobRequestResult, []Change, error) {
				return f.s.UpsertJob(f.next(), &droverv1.JobRegisterEntry{
					Job: j.CloneVT(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), SubmittedAt: 100, RequestId: "r1"})
			},
			retry: func(f *fixture, j *droverv1.Job) (*droverv1.JobRequestResult, []Change, error) {
				changed := j.CloneVT()
				changed.TaskGroups[0].Count = 7
				return f.s.UpsertJob(f.next(), &droverv1.JobRegisterEntry{
					Job: changed, Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), SubmittedAt: 200, RequestId: "r1"})
			},
		},
		{
			name: "deregister",
			first: func(f *fixture, j *droverv1.Job) (*droverv1.JobRequestResult, []Change, error) {
				return f.s.DeregisterJob(f.next(), &droverv1.JobDeregisterEntry{
					JobId: j.GetId(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), DeregisteredAt: 100, RequestId: "r1"})
			},
			retry: func(f *fixture, j *droverv1.Job) (*droverv1.JobRequestResult, []Change, error) {
				return f.s.DeregisterJob(f.next(), &droverv1.JobDeregisterEntry{
					JobId: j.GetId(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), DeregisteredAt: 200, RequestId: "r1"})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			j := f.job(2)
			firstRes, _, err := tt.first(f, j)
			if err != nil {
				t.Fatal(err)
			}
			snap := f.s.Snapshot()
			stored := snap.JobByID(j.GetId())
			want := &droverv1.JobRequestResult{
				RequestId: "r1", Index: f.index, JobId: j.GetId(), EvalId: firstRes.GetEvalId(),
				JobVersion: stored.GetVersion(), JobModifyIndex: stored.GetJobModifyIndex(), AppliedAt: 100,
			}
			if !firstRes.EqualVT(want) || !snap.JobRequestResult("r1").EqualVT(want) {
				t.Fatalf("first result %v, stored %v, want %v", firstRes, snap.JobRequestResult("r1"), want)
			}
			if snap.EvalByID(firstRes.GetEvalId()) == nil {
				t.Errorf("result names evaluation %s, which is not stored", firstRes.GetEvalId())
			}
			before, err := snap.Digest()
			if err != nil {
				t.Fatal(err)
			}

			res, changes, err := tt.retry(f, j)
			if err != nil {
				t.Fatal(err)
			}
			if !res.EqualVT(want) {
				t.Errorf("retry result %v, want the first %v", res, want)
			}
			if len(changes) != 0 {
				t.Errorf("retry changed %d objects, want none", len(changes))
			}
			after := f.s.Snapshot()
			if got, _ := after.Digest(); !maps.Equal(got, before) {
				t.Errorf("retry changed the state:\nbefore %v\nafter  %v", before, got)
			}
			if after.Index() != f.index {
				t.Errorf("store index %d after the retry, want %d (applied, if empty)", after.Index(), f.index)
			}
		})
	}
}

func TestJobRequestWithoutIDIsNotStored(t *testing.T) {
	f := newFixture(t)
	j := mock.Job(1)
	res, _ := f.registerAt(j, "", 100)
	stored := f.s.Snapshot().JobByID(j.GetId())
	if res.GetIndex() != f.index || res.GetJobId() != j.GetId() || res.GetEvalId() == "" ||
		res.GetJobModifyIndex() != stored.GetJobModifyIndex() || res.GetAppliedAt() != 100 {
		t.Errorf("result %v does not describe the write at %d", res, f.index)
	}
	for r := range f.s.Snapshot().JobRequestResults() {
		t.Errorf("stored result %v for a write without request id", r)
	}
	if idx := f.s.Snapshot().TableIndex(TableJobRequests); idx != 0 {
		t.Errorf("job requests table index = %d, want 0", idx)
	}
	// Without an id every write applies: the same spec adds an evaluation.
	again, _ := f.registerAt(j, "", 101)
	if again.GetEvalId() == res.GetEvalId() || again.GetIndex() != f.index {
		t.Errorf("second write without request id was not applied: %v", again)
	}
}

func TestFailedJobRequestIsNotStored(t *testing.T) {
	f := newFixture(t)
	j := mock.Job(1)
	_, _, err := f.s.DeregisterJob(f.next(), &droverv1.JobDeregisterEntry{
		JobId: j.GetId(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), DeregisteredAt: 1, RequestId: "r1"})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if f.s.Snapshot().JobRequestResult("r1") != nil {
		t.Fatalf("a refused write stored its request id")
	}
	// The retry, once the job exists, applies.
	f.register(j)
	res, _, err := f.s.DeregisterJob(f.next(), &droverv1.JobDeregisterEntry{
		JobId: j.GetId(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), DeregisteredAt: 2, RequestId: "r1"})
	if err != nil || res.GetIndex() != f.index || !f.s.Snapshot().JobByID(j.GetId()).GetStop() {
		t.Fatalf("retry: result %v, err %v, want the job stopped at %d", res, err, f.index)
	}
}

func TestJobRequestPruning(t *testing.T) {
	const now = 10 * retention
	cutoff := now - retention
	tests := []struct {
		name      string
		appliedAt int64
		wantKept  bool
	}{
		{"long expired", cutoff - retention, false},
		{"expired by 1ns", cutoff - 1, false},
		{"at the boundary", cutoff, true},
		{"live", cutoff + 1, true},
		{"same time", now, true},
	}
	f := newFixture(t)
	j := mock.Job(1)
	// Write in reverse time order so that pruning cannot rely on insertion
	// order.
	for i := len(tests) - 1; i >= 0; i-- {
		f.registerAt(j, tests[i].name, tests[i].appliedAt)
	}
	res, _ := f.registerAt(j, "trigger", now)
	snap := f.s.Snapshot()
	for _, tt := range tests {
		if got := snap.JobRequestResult(tt.name) != nil; got != tt.wantKept {
			t.Errorf("%s (applied at cutoff%+d): kept %v, want %v", tt.name, tt.appliedAt-cutoff, got, tt.wantKept)
		}
	}
	if snap.JobRequestResult("trigger") != res {
		t.Errorf("the pruning write did not store its own result")
	}
	if snap.TableIndex(TableJobRequests) != f.index {
		t.Errorf("job requests table index = %d, want %d", snap.TableIndex(TableJobRequests), f.index)
	}
}

func TestJobRequestReplayWindow(t *testing.T) {
	tests := []struct {
		name       string
		retryAt    int64
		wantReplay bool
	}{
		{"within the window", retention - 1, true},
		{"at the window's end", retention, true},
		{"after the window", retention + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			j := mock.Job(1)
			first, _ := f.registerAt(j, "r1", 0)
			retry, _ := f.registerAt(j, "r1", tt.retryAt)
			if replayed := retry.EqualVT(first); replayed != tt.wantReplay {
				t.Fatalf("retry at %d: replayed %v, want %v (result %v)", tt.retryAt, replayed, tt.wantReplay, retry)
			}
			if !tt.wantReplay {
				// The expired result was dropped and the new one stored.
				if stored := f.s.Snapshot().JobRequestResult("r1"); stored.GetIndex() != f.index || stored.GetAppliedAt() != tt.retryAt {
					t.Errorf("stored result %v, want the retry's at index %d", stored, f.index)
				}
			}
		})
	}
}
