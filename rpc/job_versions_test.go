package rpc_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestRegisterEnforceIndex checks the check-and-set of enforce_index,
// including two registrations racing with the same index: exactly one
// applies.
func TestRegisterEnforceIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := mock.Job(1)
	register := func(job *droverv1.Job, enforce *uint64) (*droverv1.RegisterJobResponse, error) {
		return e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: job.CloneVT(), EnforceIndex: enforce, RequestId: uuid.NewString()})
	}
	if _, err := register(j, proto.Uint64(7)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("enforce_index 7 on a job that does not exist: %v, want FailedPrecondition", err)
	}
	first, err := register(j, proto.Uint64(0))
	if err != nil {
		t.Fatalf("enforce_index 0 on a new job: %v", err)
	}
	if _, err := register(j, proto.Uint64(0)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("enforce_index 0 on an existing job: %v, want FailedPrecondition", err)
	}

	// Two changes race, both planned against the first version.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			changed := j.CloneVT()
			changed.TaskGroups[0].Count = int32(2 + i)
			_, errs[i] = register(changed, proto.Uint64(first.GetJobModifyIndex()))
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch status.Code(err) {
		case codes.OK:
			won++
		case codes.FailedPrecondition:
		default:
			t.Errorf("racing registration: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of 2 racing registrations with the same enforce_index applied (%v), want exactly 1", won, errs)
	}
	got, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetJob().GetVersion() != first.GetJobVersion()+1 {
		t.Errorf("job at version %d after one winning change, want %d", got.GetJob().GetVersion(), first.GetJobVersion()+1)
	}
}

// TestValidateJob answers violations and warnings without writing.
func TestValidateJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := mock.Job(3)
	j.TaskGroups[0].Update = &droverv1.UpdateStrategy{MaxParallel: proto.Int32(5)}
	before := e.jobTables()
	resp, err := e.jobs.Validate(e.ctx(), &droverv1.ValidateJobRequest{Job: j})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetViolations()) != 0 || len(resp.GetWarnings()) != 1 {
		t.Errorf("valid job with max_parallel over count: violations %v, warnings %v; want none and one", resp.GetViolations(), resp.GetWarnings())
	}
	if resp.GetJob().GetTaskGroups()[0].GetUpdate().GetHealthyDeadline() == nil {
		t.Errorf("the answered job is not canonical: %v", resp.GetJob().GetTaskGroups()[0].GetUpdate())
	}

	j.Priority = 500
	j.TaskGroups[0].Update.Canary = proto.Int32(-1)
	resp, err = e.jobs.Validate(e.ctx(), &droverv1.ValidateJobRequest{Job: j})
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, v := range resp.GetViolations() {
		fields = append(fields, v.GetField())
	}
	if len(fields) != 2 || fields[0] != "job.priority" || fields[1] != "job.task_groups[0].update.canary" {
		t.Errorf("violations name %v, want job.priority and the canary", fields)
	}
	if resp, err = e.jobs.Validate(e.ctx(), &droverv1.ValidateJobRequest{}); err != nil || len(resp.GetViolations()) != 1 {
		t.Errorf("no job: %v, %v; want one violation", resp, err)
	}
	if e.jobTables() != before {
		t.Errorf("Validate wrote")
	}
}

// TestVersionsAndRevert lists versions with their changes and goes back to
// an earlier one.
func TestVersionsAndRevert(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := mock.Job(1)
	versions := []func(*droverv1.Job){
		func(*droverv1.Job) {},
		func(j *droverv1.Job) { j.TaskGroups[0].Count = 3 },
		func(j *droverv1.Job) { j.TaskGroups[0].Count = 3; j.Meta = map[string]string{"owner": "ops"} },
	}
	for _, edit := range versions {
		v := j.CloneVT()
		edit(v)
		if _, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: v}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := e.jobs.Versions(e.ctx(), &droverv1.JobVersionsRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetVersions()) != 3 {
		t.Fatalf("%d versions, want 3", len(resp.GetVersions()))
	}
	wantChanges := [][]string{{"meta[owner]"}, {"task_groups[" + j.TaskGroups[0].GetName() + "].count"}, nil}
	for i, v := range resp.GetVersions() {
		if got := v.GetJob().GetVersion(); got != uint64(2-i) {
			t.Errorf("versions[%d] is version %d, want %d (newest first)", i, got, 2-i)
		}
		var paths []string
		for _, c := range v.GetChanges() {
			paths = append(paths, c.GetPath())
		}
		if !slices.Equal(paths, wantChanges[i]) {
			t.Errorf("version %d changes %v, want %v", v.GetJob().GetVersion(), v.GetChanges(), wantChanges[i])
		}
	}

	for _, tt := range []struct {
		name string
		req  *droverv1.RevertJobRequest
		code codes.Code
	}{
		{"to the current version", &droverv1.RevertJobRequest{JobId: j.GetId(), Version: 2}, codes.FailedPrecondition},
		{"to a version not kept", &droverv1.RevertJobRequest{JobId: j.GetId(), Version: 9}, codes.NotFound},
		{"of an unknown job", &droverv1.RevertJobRequest{JobId: "nope", Version: 0}, codes.NotFound},
		{"from the wrong prior version", &droverv1.RevertJobRequest{JobId: j.GetId(), Version: 0, EnforcePriorVersion: proto.Uint64(1)}, codes.FailedPrecondition},
		{"with a bad job id", &droverv1.RevertJobRequest{JobId: "a b", Version: 0}, codes.InvalidArgument},
	} {
		before := e.jobTables()
		if _, err := e.jobs.Revert(e.ctx(), tt.req); status.Code(err) != tt.code {
			t.Errorf("revert %s: %v, want %s", tt.name, err, tt.code)
		}
		if e.jobTables() != before {
			t.Errorf("refused revert %s wrote", tt.name)
		}
	}

	req := &droverv1.RevertJobRequest{JobId: j.GetId(), Version: 0, EnforcePriorVersion: proto.Uint64(2), RequestId: uuid.NewString()}
	rev, err := e.jobs.Revert(e.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	if rev.GetJobVersion() != 3 {
		t.Errorf("revert made version %d, want 3", rev.GetJobVersion())
	}
	again, err := e.jobs.Revert(e.ctx(), req)
	if err != nil || !proto.Equal(again, rev) {
		t.Errorf("retried revert: %v, %v; want the first answer %v", again, err, rev)
	}
	got, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetJob().GetVersion() != 3 || got.GetJob().GetTaskGroups()[0].GetCount() != j.TaskGroups[0].GetCount() || len(got.GetJob().GetMeta()) != 0 {
		t.Errorf("after revert to 0 the job is %v, want version 3 with version 0's content", got.GetJob())
	}
}
