package rpc

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// jobService implements droverv1.JobService.
type jobService struct {
	*services
	droverv1.UnimplementedJobServiceServer
}

// Register writes the job and a pending evaluation in one raft entry, so a
// job is never stored without the evaluation that schedules it. A request
// id the cluster already applied returns the first answer again and writes
// nothing.
func (s *jobService) Register(ctx context.Context, req *droverv1.RegisterJobRequest) (*droverv1.RegisterJobResponse, error) {
	job := req.GetJob()
	if job != nil {
		job.ClearServerFields()
		job.Canonicalize()
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	res, err := s.register(ctx, job, req.GetRequestId(), req.EnforceIndex)
	if err != nil {
		return nil, err
	}
	return &droverv1.RegisterJobResponse{
		EvalId:         res.GetEvalId(),
		JobVersion:     res.GetJobVersion(),
		JobModifyIndex: res.GetJobModifyIndex(),
		Index:          res.GetIndex(),
		Warnings:       job.Warnings(),
	}, nil
}

// register writes a canonical, valid job with the evaluation that
// schedules it. With enforceIndex the write applies only if the job's
// job_modify_index is still that one; it goes in an entry of its own type,
// which the version gate keeps from servers that would apply it without
// the check.
func (s *jobService) register(ctx context.Context, job *droverv1.Job, requestID string, enforceIndex *uint64) (*droverv1.JobRequestResult, error) {
	now := time.Now().UnixNano()
	eval := NewEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, "", now)
	msgType := droverv1.MessageTypeJobRegister
	if enforceIndex != nil {
		msgType = droverv1.MessageTypeJobRegisterChecked
	}
	index, resp, err := s.backend.Apply(ctx, msgType,
		&droverv1.JobRegisterEntry{Job: job, Eval: eval, SubmittedAt: now, RequestId: requestID, EnforceIndex: enforceIndex})
	if err != nil {
		return nil, err
	}
	return jobRequestResult(resp, index, job.GetId())
}

// jobRequestResult takes the FSM's answer to a job write out of an Apply
// response. Its index is that of the entry that applied the request: the
// entry just written, or for a replayed request id the first one, whose
// answer (evaluation, job version) the response repeats.
func jobRequestResult(resp any, index uint64, jobID string) (*droverv1.JobRequestResult, error) {
	res, ok := resp.(*droverv1.JobRequestResult)
	if !ok || res == nil {
		return nil, fmt.Errorf("write of job %q at index %d: unexpected FSM response %T", jobID, index, resp)
	}
	return res, nil
}

// Deregister marks the job stopped and writes the evaluation that stops its
// allocations. A request id is handled as in Register.
func (s *jobService) Deregister(ctx context.Context, req *droverv1.DeregisterJobRequest) (*droverv1.DeregisterJobResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	job := s.backend.State().Snapshot().JobByID(req.GetJobId())
	if job == nil {
		return nil, fmt.Errorf("job %q: %w", req.GetJobId(), state.ErrNotFound)
	}
	now := time.Now().UnixNano()
	eval := NewEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER, "", now)
	index, resp, err := s.backend.Apply(ctx, droverv1.MessageTypeJobDeregister,
		&droverv1.JobDeregisterEntry{JobId: job.GetId(), Eval: eval, DeregisteredAt: now, RequestId: req.GetRequestId()})
	if err != nil {
		return nil, err
	}
	res, err := jobRequestResult(resp, index, job.GetId())
	if err != nil {
		return nil, err
	}
	return &droverv1.DeregisterJobResponse{EvalId: res.GetEvalId(), Index: res.GetIndex()}, nil
}

// Get returns the current version of a job.
func (s *jobService) Get(ctx context.Context, req *droverv1.GetJobRequest) (*droverv1.GetJobResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	job, meta, err := getObject(ctx, s.services, req.GetQuery(), state.TableJobs, fmt.Sprintf("job %q", req.GetJobId()),
		func(snap *state.Snapshot) *droverv1.Job { return snap.JobByID(req.GetJobId()) })
	if err != nil {
		return nil, err
	}
	return &droverv1.GetJobResponse{Job: job, Meta: meta}, nil
}

// List returns one page of jobs in id order.
func (s *jobService) List(ctx context.Context, req *droverv1.ListJobsRequest) (*droverv1.ListJobsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	jobs, next, meta, err := listObjects(ctx, s.services, req.GetQuery(), state.TableJobs,
		func(snap *state.Snapshot) ([]*droverv1.Job, string) { return snap.ListJobs(pageOf(req.GetPage())) })
	if err != nil {
		return nil, err
	}
	return &droverv1.ListJobsResponse{Jobs: jobs, NextToken: next, Meta: meta}, nil
}

// Allocations returns one page of the job's allocations in id order.
func (s *jobService) Allocations(ctx context.Context, req *droverv1.ListJobAllocationsRequest) (*droverv1.ListJobAllocationsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	resp := &droverv1.ListJobAllocationsResponse{}
	meta, err := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		allocs, index := snap.AllocsByJob(req.GetJobId())
		resp.Allocations, resp.NextToken = state.Paginate(slices.Values(allocs), (*droverv1.Allocation).GetId, pageOf(req.GetPage()))
		return index, nil
	})
	if err != nil {
		return nil, err
	}
	resp.Meta = meta
	return resp, nil
}

// Evaluations returns one page of the job's evaluations in id order.
func (s *jobService) Evaluations(ctx context.Context, req *droverv1.ListJobEvaluationsRequest) (*droverv1.ListJobEvaluationsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	resp := &droverv1.ListJobEvaluationsResponse{}
	meta, err := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		var index uint64 = 1
		evals := snap.EvalsByJob(req.GetJobId())
		for ev := range evals {
			index = max(index, ev.GetModifyIndex())
		}
		resp.Evaluations, resp.NextToken = state.Paginate(evals, (*droverv1.Evaluation).GetId, pageOf(req.GetPage()))
		return index, nil
	})
	if err != nil {
		return nil, err
	}
	resp.Meta = meta
	return resp, nil
}
