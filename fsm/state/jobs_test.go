package state

import (
	"errors"
	"slices"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestUpsertJobVersions(t *testing.T) {
	f := newFixture(t)
	j := mock.Job(3)
	f.register(j)
	first := f.s.Snapshot().JobByID(j.GetId())
	if first.GetVersion() != 0 || first.GetJobModifyIndex() != f.index || first.GetStatus() != droverv1.JobStatus_JOB_STATUS_PENDING {
		t.Fatalf("first registration: version %d, job modify index %d, status %s", first.GetVersion(), first.GetJobModifyIndex(), first.GetStatus())
	}

	// Same specification: no new version, but a new evaluation.
	same := mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	if _, _, err := f.s.UpsertJob(f.next(), &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: same}); err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot()
	if got := snap.JobByID(j.GetId()); got.GetVersion() != 0 || got.GetModifyIndex() != first.GetModifyIndex() {
		t.Errorf("unchanged job was rewritten: version %d modify %d", got.GetVersion(), got.GetModifyIndex())
	}
	if ev := snap.EvalByID(same.GetId()); ev.GetJobModifyIndex() != first.GetJobModifyIndex() {
		t.Errorf("eval job modify index = %d, want %d", ev.GetJobModifyIndex(), first.GetJobModifyIndex())
	}

	// Changed specification: version 1, both versions kept.
	changed := j.CloneVT()
	changed.TaskGroups[0].Count = 5
	f.register(changed)
	snap = f.s.Snapshot()
	if got := snap.JobByID(j.GetId()); got.GetVersion() != 1 || got.GetCreateIndex() != first.GetCreateIndex() {
		t.Errorf("changed job: version %d create index %d", got.GetVersion(), got.GetCreateIndex())
	}
	var versions []uint64
	for v := range snap.JobVersions(j.GetId()) {
		versions = append(versions, v.GetVersion())
	}
	if !slices.Equal(versions, []uint64{0, 1}) {
		t.Errorf("versions = %v, want [0 1]", versions)
	}
	if snap.JobVersion(j.GetId(), 0).GetTaskGroups()[0].GetCount() != 3 {
		t.Errorf("version 0 lost its count")
	}
	var evals int
	for range snap.EvalsByJob(j.GetId()) {
		evals++
	}
	if evals != 3 {
		t.Errorf("evals of job = %d, want 3", evals)
	}
}

func TestDeregisterJob(t *testing.T) {
	f := newFixture(t)
	j := f.job(1)
	ev := mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER)
	index := f.next()
	if _, _, err := f.s.DeregisterJob(index, &droverv1.JobDeregisterEntry{JobId: j.GetId(), Eval: ev}); err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot()
	got := snap.JobByID(j.GetId())
	if !got.GetStop() || got.GetVersion() != 1 || got.GetStatus() != droverv1.JobStatus_JOB_STATUS_DEAD || got.GetJobModifyIndex() != index {
		t.Errorf("stopped job: stop=%v version=%d status=%s job modify index=%d", got.GetStop(), got.GetVersion(), got.GetStatus(), got.GetJobModifyIndex())
	}
	if snap.EvalByID(ev.GetId()).GetJobModifyIndex() != index {
		t.Errorf("deregister eval does not point at the stop")
	}

	_, _, err := f.s.DeregisterJob(f.next(), &droverv1.JobDeregisterEntry{JobId: "missing", Eval: mock.Eval(j, 1)})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("deregister of a missing job: err = %v, want ErrNotFound", err)
	}

	// Registering again revives the job as a new version.
	f.register(j)
	if got := f.s.Snapshot().JobByID(j.GetId()); got.GetStop() || got.GetVersion() != 2 {
		t.Errorf("re-registered job: stop=%v version=%d", got.GetStop(), got.GetVersion())
	}
}

func TestUpsertJobRejectsMalformedEntries(t *testing.T) {
	f := newFixture(t)
	j := mock.Job(1)
	otherJob := mock.Job(1)
	tests := []struct {
		name  string
		entry *droverv1.JobRegisterEntry
	}{
		{"no job", &droverv1.JobRegisterEntry{Eval: mock.Eval(j, 1)}},
		{"no eval", &droverv1.JobRegisterEntry{Job: j.CloneVT()}},
		{"eval of another job", &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: mock.Eval(otherJob, 1)}},
		{"eval without status", &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: &droverv1.Evaluation{Id: mock.ID(), JobId: j.GetId()}}},
		{"eval with malformed id", &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: &droverv1.Evaluation{Id: "nope", JobId: j.GetId(), Status: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := f.s.UpsertJob(f.next(), tt.entry); !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("err = %v, want ErrInvalidEntry", err)
			}
			if f.s.Snapshot().JobByID(j.GetId()) != nil {
				t.Errorf("malformed entry wrote the job")
			}
		})
	}
}

func TestIteratorsCanBeRangedTwice(t *testing.T) {
	f := newFixture(t)
	j := f.job(1)
	evals := f.s.Snapshot().EvalsByJob(j.GetId())
	for pass := range 2 {
		n := 0
		for range evals {
			n++
		}
		if n != 1 {
			t.Errorf("pass %d saw %d evaluations, want 1", pass, n)
		}
	}
}

// TestJobsByType finds jobs by type, and follows a job whose new version
// changes its type.
func TestJobsByType(t *testing.T) {
	f := newFixture(t)
	typed := func(typ droverv1.JobType) *droverv1.Job {
		j := mock.Job(1)
		j.Type = typ
		f.register(j)
		return j
	}
	typed(droverv1.JobType_JOB_TYPE_SERVICE)
	typed(droverv1.JobType_JOB_TYPE_BATCH)
	sys1, sys2 := typed(droverv1.JobType_JOB_TYPE_SYSTEM), typed(droverv1.JobType_JOB_TYPE_SYSTEM)
	systemIDs := func() []string {
		var ids []string
		for j := range f.s.Snapshot().JobsByType(droverv1.JobType_JOB_TYPE_SYSTEM) {
			ids = append(ids, j.GetId())
		}
		return ids
	}
	want := []string{sys1.GetId(), sys2.GetId()}
	slices.Sort(want)
	if got := systemIDs(); !slices.Equal(got, want) {
		t.Errorf("system jobs %v, want %v", got, want)
	}
	sys1.Type = droverv1.JobType_JOB_TYPE_SERVICE
	f.register(sys1)
	if got := systemIDs(); !slices.Equal(got, []string{sys2.GetId()}) {
		t.Errorf("after %s became a service job: system jobs %v, want [%s]", sys1.GetId(), got, sys2.GetId())
	}
}
