package rpc

import (
	"context"
	"fmt"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// deploymentService implements droverv1.DeploymentService. Its writes are
// checked against the leader's state before they are proposed, for a clear
// refusal; the FSM checks again, as the state may change in between (a
// status change to a deployment that ended meanwhile is skipped).
type deploymentService struct {
	*services
	droverv1.UnimplementedDeploymentServiceServer
}

// Get returns one deployment.
func (s *deploymentService) Get(ctx context.Context, req *droverv1.GetDeploymentRequest) (*droverv1.GetDeploymentResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	d, meta, err := getObject(ctx, s.services, req.GetQuery(), state.TableDeployments, "deployment "+req.GetDeploymentId(),
		func(snap *state.Snapshot) *droverv1.Deployment { return snap.DeploymentByID(req.GetDeploymentId()) })
	if err != nil {
		return nil, err
	}
	return &droverv1.GetDeploymentResponse{Deployment: d, Meta: meta}, nil
}

// List returns one page of deployments in id order, or every deployment of
// one job, newest first.
func (s *deploymentService) List(ctx context.Context, req *droverv1.ListDeploymentsRequest) (*droverv1.ListDeploymentsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	deployments, next, meta, err := listObjects(ctx, s.services, req.GetQuery(), state.TableDeployments,
		func(snap *state.Snapshot) ([]*droverv1.Deployment, string) {
			if id := req.GetJobId(); id != "" {
				return snap.DeploymentsByJob(id), ""
			}
			return snap.ListDeployments(pageOf(req.GetPage()))
		})
	if err != nil {
		return nil, err
	}
	return &droverv1.ListDeploymentsResponse{Deployments: deployments, NextToken: next, Meta: meta}, nil
}

// Promote promotes canaries; the FSM refuses unless every canary of the
// promoted groups is healthy.
func (s *deploymentService) Promote(ctx context.Context, req *droverv1.PromoteDeploymentRequest) (*droverv1.DeploymentWriteResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	d, job, err := s.active(req.GetDeploymentId())
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	eval := DeploymentEval(job, d, now)
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeDeploymentPromote,
		&droverv1.DeploymentPromoteEntry{DeploymentId: d.GetId(), Groups: req.GetGroups(), Eval: eval, PromotedAt: now})
	if err != nil {
		return nil, err
	}
	return &droverv1.DeploymentWriteResponse{EvalId: eval.GetId(), Index: index}, nil
}

// Pause pauses a running deployment or resumes a paused one; resuming
// writes the evaluation that goes on with it.
func (s *deploymentService) Pause(ctx context.Context, req *droverv1.PauseDeploymentRequest) (*droverv1.DeploymentWriteResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	d, job, err := s.active(req.GetDeploymentId())
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	update := &droverv1.DeploymentStatusUpdate{DeploymentId: d.GetId()}
	entry := &droverv1.DeploymentStatusUpdateEntry{Updates: []*droverv1.DeploymentStatusUpdate{update}, UpdatedAt: now}
	switch {
	case req.GetPause() && d.GetStatus() == droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING:
		update.Status, update.StatusDescription = droverv1.DeploymentStatus_DEPLOYMENT_STATUS_PAUSED, "Deployment is paused"
	case !req.GetPause() && d.GetStatus() == droverv1.DeploymentStatus_DEPLOYMENT_STATUS_PAUSED:
		update.Status, update.StatusDescription = droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, "Deployment is running"
		entry.Evals = append(entry.Evals, DeploymentEval(job, d, now))
	default:
		return nil, fmt.Errorf("deployment %s is %s already: %w", d.GetId(), d.GetStatus().Name(), ErrFailedPrecondition)
	}
	return s.writeStatus(ctx, entry, nil)
}

// Fail fails an active deployment. If a group of it has auto_revert, the
// job's latest stable version is registered again in the same entry.
func (s *deploymentService) Fail(ctx context.Context, req *droverv1.FailDeploymentRequest) (*droverv1.DeploymentWriteResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	d, job, err := s.active(req.GetDeploymentId())
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	update := &droverv1.DeploymentStatusUpdate{DeploymentId: d.GetId(),
		Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED, StatusDescription: "Deployment marked as failed"}
	entry := &droverv1.DeploymentStatusUpdateEntry{Updates: []*droverv1.DeploymentStatusUpdate{update}, UpdatedAt: now}
	rv := RevertOnFailure(s.backend.State().Snapshot(), d, job, now)
	update.StatusDescription += rv.Note
	if rv.Entry != nil {
		entry.Revert = rv.Entry
	} else {
		entry.Evals = append(entry.Evals, DeploymentEval(job, d, now))
	}
	return s.writeStatus(ctx, entry, rv.Version)
}

// active returns the deployment and its job, refusing a deployment that
// does not exist or has ended.
func (s *deploymentService) active(id string) (*droverv1.Deployment, *droverv1.Job, error) {
	snap := s.backend.State().Snapshot()
	d := snap.DeploymentByID(id)
	if d == nil {
		return nil, nil, fmt.Errorf("deployment %s: %w", id, state.ErrNotFound)
	}
	if d.GetStatus().Terminal() {
		return nil, nil, fmt.Errorf("deployment %s is %s: %w", id, d.GetStatus().Name(), ErrFailedPrecondition)
	}
	job := snap.JobByID(d.GetJobId())
	if job == nil {
		return nil, nil, fmt.Errorf("deployment %s: job %q: %w", id, d.GetJobId(), state.ErrNotFound)
	}
	return d, job, nil
}

func (s *deploymentService) writeStatus(ctx context.Context, entry *droverv1.DeploymentStatusUpdateEntry, reverted *uint64) (*droverv1.DeploymentWriteResponse, error) {
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeDeploymentStatus, entry)
	if err != nil {
		return nil, err
	}
	resp := &droverv1.DeploymentWriteResponse{Index: index, RevertedToVersion: reverted}
	if len(entry.GetEvals()) > 0 {
		resp.EvalId = entry.GetEvals()[0].GetId()
	}
	if r := entry.GetRevert(); r != nil {
		resp.EvalId = r.GetEval().GetId()
	}
	return resp, nil
}

// DeploymentEval is the evaluation that moves a deployment on.
func DeploymentEval(job *droverv1.Job, d *droverv1.Deployment, now int64) *droverv1.Evaluation {
	ev := NewEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_DEPLOYMENT, "", now)
	if p := d.GetEvalPriority(); p > 0 {
		ev.Priority = p
	}
	return ev
}

// Revert is what failing a deployment does to its job.
type Revert struct {
	// Entry registers the stable version again; nil when there is none
	// to go back to, or the deployment's groups do not revert.
	Entry *droverv1.JobRegisterEntry
	// Version is the version reverted to, when Entry is set.
	Version *uint64
	// Note ends the deployment's status description: why it reverts or
	// does not.
	Note string
}

// RevertOnFailure decides the revert of a failing deployment of job: with
// auto_revert on any of its groups, the job's latest stable version older
// than the deployment's (of the same job, not one purged and registered
// again) is registered again, unless the current job has that
// specification already.
func RevertOnFailure(snap *state.Snapshot, d *droverv1.Deployment, job *droverv1.Job, now int64) Revert {
	reverts := false
	for _, g := range d.GetGroups() {
		reverts = reverts || g.GetAutoRevert()
	}
	if !reverts {
		return Revert{}
	}
	stable := snap.LatestStableVersion(job.GetId(), d.GetJobVersion(), d.GetJobCreateIndex())
	if stable == nil {
		return Revert{Note: " - no stable job version to auto revert to"}
	}
	if !stable.Supersedes(job) {
		return Revert{Note: fmt.Sprintf(" - not rolling back to stable job version %d as the current job has the same specification", stable.GetVersion())}
	}
	j := stable.CloneVT()
	j.ClearServerFields()
	version := stable.GetVersion()
	return Revert{
		Entry:   &droverv1.JobRegisterEntry{Job: j, Eval: NewEval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, "", now), SubmittedAt: now},
		Version: &version,
		Note:    fmt.Sprintf(" - rolling back to job version %d", version),
	}
}
