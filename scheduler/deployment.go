package scheduler

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Deployments: how a new job version is rolled out. A group whose update
// block has max_parallel of at least 1 is replaced a few allocations at a
// time: at most max_parallel new allocations may be in flight (placed but
// not yet reported healthy), and one unhealthy allocation of the rollout
// stops it. The deployment records the rollout; the servers count the
// agents' health reports in it, and the deployment watcher writes the
// evaluations that let the next batch go.

// Status descriptions the scheduler writes.
const (
	deploymentRunning    = "Deployment is running"
	deploymentSuccessful = "Deployment completed successfully"
	deploymentNewer      = "Cancelled due to newer version of job"
)

// cancelDeployment cancels the job's latest deployment if it is still
// active.
func cancelDeployment(in *reconcileInput, res *reconcileResult, description string) {
	if d := in.deployment; d != nil && !d.GetStatus().Terminal() {
		res.deploymentUpdates = append(res.deploymentUpdates, &droverv1.DeploymentStatusUpdate{
			DeploymentId: d.GetId(), Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_CANCELLED, StatusDescription: description})
	}
}

// currentDeployment returns the deployment that rolls out the job's
// current version: the existing one (cancelling an active one of an older
// version first), or a new one when some group has a version to roll out
// and deployments are on. It is nil when no group is rolled out.
func currentDeployment(in *reconcileInput, res *reconcileResult, groups map[string][]*droverv1.Allocation) *droverv1.Deployment {
	job := in.job
	d := in.deployment
	if d != nil && (d.GetJobVersion() != job.GetVersion() || d.GetJobCreateIndex() != job.GetCreateIndex()) {
		cancelDeployment(in, res, deploymentNewer)
		d = nil
	}
	if d != nil || !in.deployments || job.GetType() == droverv1.JobType_JOB_TYPE_BATCH {
		return d
	}
	nd := &droverv1.Deployment{
		Id: in.newDeploymentID(), JobId: job.GetId(), JobVersion: job.GetVersion(),
		JobModifyIndex: job.GetJobModifyIndex(), JobCreateIndex: job.GetCreateIndex(),
		Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, StatusDescription: deploymentRunning,
		EvalPriority: in.evalPriority, Groups: make(map[string]*droverv1.DeploymentGroup),
	}
	for _, tg := range job.GetTaskGroups() {
		u := tg.GetUpdate()
		if !u.UsesDeployments() || !needsRollout(job, tg, groups[tg.GetName()]) {
			continue
		}
		nd.Groups[tg.GetName()] = &droverv1.DeploymentGroup{
			DesiredTotal: tg.GetCount(), AutoRevert: u.GetAutoRevert(), AutoPromote: u.GetAutoPromote(),
			ProgressDeadline: int64(u.GetProgressDeadline().AsDuration()),
		}
	}
	if len(nd.GetGroups()) == 0 {
		return nil
	}
	res.deployment = nd
	return nd
}

// needsRollout reports whether a group has a version to roll out: an
// allocation the servers want running on another version, or none on
// this one yet. A change of count alone, or a replacement of a failed
// allocation, is no rollout.
func needsRollout(job *droverv1.Job, tg *droverv1.TaskGroup, allocs []*droverv1.Allocation) bool {
	current := false
	for _, a := range allocs {
		if a.ServerTerminal() || a.ClientTerminal() {
			continue
		}
		if a.GetJobVersion() != job.GetVersion() {
			return true
		}
		current = true
	}
	return !current && tg.GetCount() > 0
}

// rollout is the part of the deployment a group follows, nil when the
// group is not rolled out.
func (g *groupReconciler) rollout() *droverv1.DeploymentGroup {
	return g.deployment.GetGroups()[g.group.GetName()]
}

// rolledOut reports whether the group takes part in an active deployment.
func (g *groupReconciler) rolledOut() bool {
	return g.rollout() != nil && !g.deployment.GetStatus().Terminal()
}

// joinID is the deployment new and updated allocations of the group join,
// empty when they join none.
func (g *groupReconciler) joinID() string {
	if !g.rolledOut() {
		return ""
	}
	return g.deployment.GetId()
}

// rolloutLimit is how many allocations the group may replace now: all of
// them outside a deployment; none while the deployment is paused or failed
// or one of its allocations is unhealthy; otherwise max_parallel less the
// allocations of the deployment still waiting for their health.
func (g *groupReconciler) rolloutLimit() int {
	if g.rollout() == nil {
		return -1
	}
	if g.deployment.GetStatus() != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING {
		return 0
	}
	limit := int(g.group.GetUpdate().GetMaxParallel())
	for _, a := range g.untainted {
		if a.GetDeploymentId() != g.deployment.GetId() {
			continue
		}
		st := a.GetDeploymentStatus()
		switch {
		case st != nil && st.Healthy != nil && !st.GetHealthy():
			return 0
		case st == nil || st.Healthy == nil:
			limit--
		}
	}
	return max(0, limit)
}

// complete reports whether the group's rollout is over: nothing left to
// replace, update or place, and as many healthy allocations as it wants.
func (g *groupReconciler) complete() bool {
	d := g.ch.desired
	return g.outdated == 0 && d.place == 0 && d.inplace == 0 && d.destructive == 0 &&
		g.rollout().GetHealthyAllocs() >= g.rollout().GetDesiredTotal()
}

// completeDeployment marks a running deployment successful once every
// group of it is complete.
func completeDeployment(res *reconcileResult, d *droverv1.Deployment, groups []*groupReconciler) {
	if d == nil || d.GetStatus() != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING || res.deployment == d {
		return
	}
	for _, g := range groups {
		if !g.complete() {
			return
		}
	}
	res.deploymentUpdates = append(res.deploymentUpdates, &droverv1.DeploymentStatusUpdate{
		DeploymentId: d.GetId(), Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL, StatusDescription: deploymentSuccessful})
}
