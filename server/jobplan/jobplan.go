// Package jobplan answers JobService.Plan: it runs the real scheduler for a
// submitted job against a snapshot of the state, with the job in place of
// the stored one and a planner that records instead of writing, so that
// what it predicts is what registering the job would do on that state.
package jobplan

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// Plan runs the scheduler for job, canonical and valid, against st. cfg is
// the schedulers' configuration; now is the time in unix nanoseconds the
// registration would carry.
func Plan(ctx context.Context, st scheduler.State, cfg scheduler.Config, job *droverv1.Job, now int64) (*droverv1.PlanJobResponse, error) {
	existing := st.JobByID(job.GetId())
	candidate := registered(existing, job, st.Index()+1, now)
	eval := &droverv1.Evaluation{
		Id:             uuid.NewString(),
		Priority:       candidate.GetPriority(),
		Type:           candidate.GetType(),
		TriggeredBy:    droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER,
		JobId:          candidate.GetId(),
		Status:         droverv1.EvalStatus_EVAL_STATUS_PENDING,
		JobModifyIndex: candidate.GetJobModifyIndex(),
		CreateTime:     now,
		ModifyTime:     now,
	}
	rec := &recorder{index: st.Index() + 1}
	cfg.SubmitEmptyPlans = true
	sched, err := scheduler.New(candidate.GetType(), withJob{State: st, job: candidate, eval: eval}, rec, cfg)
	if err != nil {
		return nil, fmt.Errorf("plan job %q: %w", job.GetId(), err)
	}
	if err := sched.Process(ctx, eval); err != nil {
		return nil, fmt.Errorf("plan job %q: %w", job.GetId(), err)
	}
	resp := &droverv1.PlanJobResponse{
		JobExists:      existing != nil,
		JobModifyIndex: existing.GetJobModifyIndex(),
		Index:          st.Index(),
		WouldBlock:     rec.blocked,
	}
	if existing != nil {
		resp.Changes = droverv1.SpecChanges(existing, job)
	}
	if rec.plan != nil {
		resp.DesiredUpdates = rec.plan.GetDesiredUpdates()
	}
	if rec.eval != nil {
		resp.PlacementFailures = rec.eval.GetPlacementFailures()
	}
	return resp, nil
}

// registered is the job as the state store would keep it after the
// registration at index: the stored job when nothing changes, else the next
// version (see state.UpsertJob).
func registered(existing, job *droverv1.Job, index uint64, now int64) *droverv1.Job {
	if !job.Supersedes(existing) {
		return existing
	}
	j := job.CloneVT()
	j.BecomeNextVersion(existing, index, now)
	j.Status = droverv1.JobStatus_JOB_STATUS_PENDING
	return j
}

// withJob is the state with the planned job registered and its evaluation
// written.
type withJob struct {
	scheduler.State
	job  *droverv1.Job
	eval *droverv1.Evaluation
}

func (w withJob) JobByID(id string) *droverv1.Job {
	if id == w.job.GetId() {
		return w.job
	}
	return w.State.JobByID(id)
}

func (w withJob) JobVersion(id string, version uint64) *droverv1.Job {
	if id == w.job.GetId() && version == w.job.GetVersion() {
		return w.job
	}
	return w.State.JobVersion(id, version)
}

func (w withJob) EvalByID(id string) *droverv1.Evaluation {
	if id == w.eval.GetId() {
		return w.eval
	}
	return w.State.EvalByID(id)
}

// errSecondPlan guards the recorder's assumption that a plan it accepts in
// full is the scheduler's last.
var errSecondPlan = errors.New("the scheduler submitted a second plan")

// recorder is a scheduler.Planner that accepts every plan in full and
// writes nothing.
type recorder struct {
	index   uint64
	plan    *droverv1.Plan
	eval    *droverv1.Evaluation
	blocked bool
}

func (r *recorder) SubmitPlan(_ context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, scheduler.State, error) {
	if r.plan != nil {
		return nil, nil, errSecondPlan
	}
	r.plan = plan
	return &droverv1.PlanResult{NodePlans: plan.GetNodePlans(), AllocIndex: r.index}, nil, nil
}

func (r *recorder) UpdateEval(_ context.Context, eval *droverv1.Evaluation) error {
	r.eval = eval
	return nil
}

func (r *recorder) CreateEval(_ context.Context, eval *droverv1.Evaluation) error {
	if eval.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_BLOCKED {
		r.blocked = true
	}
	return nil
}

func (r *recorder) ReblockEval(context.Context, *droverv1.Evaluation) error {
	r.blocked = true
	return nil
}
