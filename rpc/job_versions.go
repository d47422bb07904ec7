package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Validate canonicalizes and checks a job as Register does, and answers
// the violations instead of refusing the call.
func (s *jobService) Validate(_ context.Context, req *droverv1.ValidateJobRequest) (*droverv1.ValidateJobResponse, error) {
	job := req.GetJob()
	if job == nil {
		return &droverv1.ValidateJobResponse{Violations: []*droverv1.FieldViolation{{Field: "job", Description: "is required"}}}, nil
	}
	job.ClearServerFields()
	job.Canonicalize()
	resp := &droverv1.ValidateJobResponse{Job: job, Warnings: job.Warnings()}
	if err := (&droverv1.RegisterJobRequest{Job: job}).Validate(); err != nil {
		var verr *droverv1.ValidationError
		if !errors.As(err, &verr) {
			return nil, err
		}
		resp.Violations = verr.Violations
	}
	return resp, nil
}

// Plan canonicalizes and checks a job as Register does, then has the
// leader's scheduler say what registering it would do, writing nothing.
func (s *jobService) Plan(ctx context.Context, req *droverv1.PlanJobRequest) (*droverv1.PlanJobResponse, error) {
	job := req.GetJob()
	if job != nil {
		job.ClearServerFields()
		job.Canonicalize()
	}
	if err := (&droverv1.RegisterJobRequest{Job: job}).Validate(); err != nil {
		return nil, err
	}
	if s.planner == nil {
		return nil, fmt.Errorf("job planning is not running on this server: %w", ErrUnavailable)
	}
	resp, err := s.planner.PlanJob(ctx, job)
	if err != nil {
		return nil, err
	}
	resp.Warnings = job.Warnings()
	return resp, nil
}

// Versions answers the kept versions of a job, newest first, each with the
// changes from the next older kept one.
func (s *jobService) Versions(ctx context.Context, req *droverv1.JobVersionsRequest) (*droverv1.JobVersionsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var versions []*droverv1.Job
	meta, err := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		versions = versions[:0]
		var index uint64
		for j := range snap.JobVersions(req.GetJobId()) {
			versions = append(versions, j)
			index = max(index, j.GetModifyIndex())
		}
		if len(versions) == 0 {
			return atLeastOne(snap.TableIndex(state.TableJobVersions)), nil
		}
		return index, nil
	})
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("job %q: %w", req.GetJobId(), state.ErrNotFound)
	}
	resp := &droverv1.JobVersionsResponse{Meta: meta}
	for i := len(versions) - 1; i >= 0; i-- {
		v := &droverv1.JobVersion{Job: versions[i]}
		if i > 0 {
			v.Changes = droverv1.SpecChanges(versions[i-1], versions[i])
		}
		resp.Versions = append(resp.Versions, v)
	}
	return resp, nil
}

// Revert registers a kept version of a job again as a new version. With
// enforce_prior_version it applies only if the job is still at that
// version when the write is applied.
func (s *jobService) Revert(ctx context.Context, req *droverv1.RevertJobRequest) (*droverv1.RevertJobResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	snap := s.backend.State().Snapshot()
	if prev := appliedRequest(snap, req.GetRequestId(), req.GetJobId()); prev != nil {
		// A retry of a revert that applied: the checks below would judge
		// the job as the revert left it.
		return revertResponse(prev), nil
	}
	current := snap.JobByID(req.GetJobId())
	if current == nil {
		return nil, fmt.Errorf("job %q: %w", req.GetJobId(), state.ErrNotFound)
	}
	var enforce *uint64
	if req.EnforcePriorVersion != nil {
		if current.GetVersion() != req.GetEnforcePriorVersion() {
			return nil, fmt.Errorf("job %q is at version %d, not %d: %w", req.GetJobId(), current.GetVersion(), req.GetEnforcePriorVersion(), ErrFailedPrecondition)
		}
		// The version read here must still be current when the write
		// applies: a check-and-set on the spec index.
		idx := current.GetJobModifyIndex()
		enforce = &idx
	}
	target := snap.JobVersion(req.GetJobId(), req.GetVersion())
	switch {
	case target == nil:
		return nil, fmt.Errorf("job %q version %d is not kept: %w", req.GetJobId(), req.GetVersion(), state.ErrNotFound)
	case target.GetVersion() == current.GetVersion():
		return nil, fmt.Errorf("job %q is at version %d already: %w", req.GetJobId(), current.GetVersion(), ErrFailedPrecondition)
	case target.GetStop():
		return nil, fmt.Errorf("job %q version %d is the job stopped; stop it with Deregister instead: %w", req.GetJobId(), req.GetVersion(), ErrFailedPrecondition)
	}
	job := target.CloneVT()
	job.ClearServerFields()
	job.Canonicalize()
	if err := (&droverv1.RegisterJobRequest{Job: job}).Validate(); err != nil {
		// The version was valid when stored; a later release's rules may
		// refuse it.
		return nil, fmt.Errorf("job %q version %d no longer passes validation: %w", req.GetJobId(), req.GetVersion(), err)
	}
	res, err := s.register(ctx, job, req.GetRequestId(), enforce)
	if err != nil {
		return nil, err
	}
	return revertResponse(res), nil
}

func revertResponse(res *droverv1.JobRequestResult) *droverv1.RevertJobResponse {
	return &droverv1.RevertJobResponse{
		EvalId:         res.GetEvalId(),
		JobVersion:     res.GetJobVersion(),
		JobModifyIndex: res.GetJobModifyIndex(),
		Index:          res.GetIndex(),
	}
}

// appliedRequest returns the stored result of a job write with this
// request id that applied within state.JobRequestRetention, or nil.
func appliedRequest(snap *state.Snapshot, requestID, jobID string) *droverv1.JobRequestResult {
	if requestID == "" {
		return nil
	}
	prev := snap.JobRequestResult(requestID)
	if prev == nil || prev.GetJobId() != jobID || time.Since(time.Unix(0, prev.GetAppliedAt())) >= state.JobRequestRetention {
		return nil
	}
	return prev
}
