package scheduler

import (
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Deployments: how a new job version is rolled out. A group whose update
// block has max_parallel of at least 1 is replaced a few allocations at a
// time: at most max_parallel new allocations may be in flight (placed but
// not yet reported healthy), and one unhealthy allocation of the rollout
// stops it. With canary N, N allocations of the new version are first
// placed beside the old ones, under the names of the first old ones, and
// the rest waits until they are promoted; each promoted canary then
// replaces the old allocation of its name. With surge, each replacement is
// placed beside the allocation it replaces, which stops only once the
// replacement is healthy. The deployment records the rollout; the servers
// count the agents' health reports in it, and the deployment watcher
// writes the evaluations that let the next batch go.

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
		dg := &droverv1.DeploymentGroup{
			DesiredTotal: tg.GetCount(), AutoRevert: u.GetAutoRevert(), AutoPromote: u.GetAutoPromote(),
			ProgressDeadline: durationpb.New(u.GetProgressDeadline().AsDuration()),
		}
		if wantsCanaries(in, groups[tg.GetName()]) {
			dg.DesiredCanaries = u.GetCanary()
		}
		nd.Groups[tg.GetName()] = dg
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

// wantsCanaries reports whether a group's rollout places canaries first:
// moving it to the job's version replaces some allocation, and the version
// is not one already proven. It is proven when an allocation of a stable
// version runs and would only be updated in place (a revert to the latest
// stable version, say): canaries would test what has run healthy before.
func wantsCanaries(in *reconcileInput, allocs []*droverv1.Allocation) bool {
	replaces := false
	for _, a := range allocs {
		if a.ServerTerminal() || a.ClientTerminal() {
			continue
		}
		switch allocUpdate(a, in.job, in.jobVersion) {
		case updateDestructive:
			replaces = true
		default:
			if in.jobVersion != nil && in.jobVersion(a.GetJobVersion()).GetStable() {
				return false
			}
		}
	}
	return replaces
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

// awaitingPromotion reports whether the group's rollout waits for its
// canaries to be promoted.
func (g *groupReconciler) awaitingPromotion() bool {
	r := g.rollout()
	return g.rolledOut() && r.GetDesiredCanaries() > 0 && !r.GetPromoted()
}

// canariesWanted is how many canaries the group places now: those it
// lacks, while its deployment runs and waits for promotion.
func (g *groupReconciler) canariesWanted() int {
	if !g.awaitingPromotion() || g.deployment.GetStatus() != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING {
		return 0
	}
	return max(0, int(g.rollout().GetDesiredCanaries())-len(g.canaries))
}

// splitRollout takes out of the group's count the new allocations that
// run beside the ones they will replace: the canaries of the active
// deployment not yet promoted, and its surge replacements not yet healthy
// whose allocation of an older version still runs. Canaries of any other
// deployment (failed, cancelled, superseded) are stopped. So are the
// deployment's unhealthy allocations while the group has a progress
// deadline and the reschedule policy an attempt left: those that replace
// nothing yet are replaced (a canary or a surge replacement is placed
// again by the rollout itself). Without a deadline, the first unhealthy
// allocation fails the deployment instead.
func (g *groupReconciler) splitRollout() {
	older := make(map[string]bool)
	for _, a := range g.untainted {
		if a.GetJobVersion() != g.job.GetVersion() {
			older[a.GetName()] = true
		}
	}
	var kept []*droverv1.Allocation
	for _, a := range g.untainted {
		active := g.rolledOut() && a.GetDeploymentId() == g.deployment.GetId()
		switch st := a.GetDeploymentStatus(); {
		case active && g.replacesUnhealthy(a) && (st.GetCanary() || older[a.GetName()]):
			g.ch.stop(a, allocUnhealthy, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
		case active && g.replacesUnhealthy(a):
			g.unhealthy = append(g.unhealthy, a)
		case st.GetCanary() && !active:
			g.ch.stop(a, allocCanaryUnpromoted, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
		case st.GetCanary():
			g.canaries = append(g.canaries, a)
		case active && a.GetJobVersion() == g.job.GetVersion() && older[a.GetName()] && !st.GetHealthy():
			g.surging = append(g.surging, a)
		default:
			kept = append(kept, a)
		}
	}
	g.untainted = kept
}

// replacesUnhealthy reports whether an allocation of the group's running
// deployment that its agent reported unhealthy is replaced: only with a
// progress deadline, and while the reschedule policy has an attempt left.
func (g *groupReconciler) replacesUnhealthy(a *droverv1.Allocation) bool {
	st := a.GetDeploymentStatus()
	return g.deployment.GetStatus() == droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING &&
		st != nil && st.Healthy != nil && !st.GetHealthy() && g.rollout().GetProgressDeadline().AsDuration() > 0 &&
		rescheduleAllowed(a, g.group.GetReschedulePolicy(), g.in.now)
}

// redundantAllocs returns the ids of the counted allocations to stop
// before any other because another of the same name stays: an allocation
// of an older version beside a healthy one of the current version (a
// promoted canary, a surge replacement), and a new allocation not known
// to be healthy beside an older one it was to replace (its rollout ended
// before it turned healthy).
func redundantAllocs(allocs []*droverv1.Allocation, version uint64) map[string]bool {
	byName := make(map[string][]*droverv1.Allocation)
	for _, a := range allocs {
		byName[a.GetName()] = append(byName[a.GetName()], a)
	}
	proven := func(a *droverv1.Allocation) bool {
		return a.GetDeploymentId() == "" || a.GetDeploymentStatus().GetHealthy()
	}
	out := make(map[string]bool)
	for _, same := range byName {
		for _, a := range same {
			for _, o := range same {
				switch {
				case a.GetJobVersion() < o.GetJobVersion() && o.GetJobVersion() == version && proven(o),
					a.GetJobVersion() > o.GetJobVersion() && !proven(a):
					out[a.GetId()] = true
				}
			}
		}
	}
	return out
}

// allocNameSet returns the names the allocations hold.
func allocNameSet(sets ...[]*droverv1.Allocation) map[string]bool {
	out := make(map[string]bool)
	for _, set := range sets {
		for _, a := range set {
			out[a.GetName()] = true
		}
	}
	return out
}

// rolloutLimit is how many allocations the group may replace now: all of
// them outside a deployment; none while the deployment is paused or failed,
// one of its allocations is unhealthy and not replaced, or the group's
// stagger has not passed since its last allocation turned healthy;
// otherwise max_parallel less the new allocations of the deployment still
// waiting for their health (those updated in place hold no slot), the
// replacements of unhealthy ones and of allocations still stopping
// included.
func (g *groupReconciler) rolloutLimit() int {
	if g.rollout() == nil {
		return -1
	}
	if g.deployment.GetStatus() != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING {
		return 0
	}
	limit := int(g.group.GetUpdate().GetMaxParallel()) - len(g.unhealthy) - g.stoppedForUpdate
	var lastHealthy int64
	for _, set := range [][]*droverv1.Allocation{g.untainted, g.canaries, g.surging} {
		for _, a := range set {
			if a.GetDeploymentId() != g.deployment.GetId() {
				continue
			}
			st := a.GetDeploymentStatus()
			switch {
			case st != nil && st.Healthy != nil && !st.GetHealthy():
				return 0
			case st == nil || st.Healthy == nil:
				// Only new allocations hold a slot: one updated in place
				// (created before the deployment) replaces nothing.
				if a.GetCreateIndex() >= g.deployment.GetCreateIndex() {
					limit--
				}
			default:
				lastHealthy = max(lastHealthy, st.GetTimestamp())
			}
		}
	}
	if stagger := int64(g.group.GetUpdate().GetStagger().AsDuration()); stagger > 0 && lastHealthy > 0 && lastHealthy+stagger > g.in.now {
		g.staggerUntil = lastHealthy + stagger
		return 0
	}
	return max(0, limit)
}

// waitsForReplacement reports whether a stopped allocation's replacement
// waits for it to be gone: stopped for an update, not yet stopped by its
// agent, and replaced by nothing yet.
func waitsForReplacement(a *droverv1.Allocation, links *allocLinks) bool {
	return a.GetDesiredDescription() == allocUpdating && !a.ClientTerminal() && !links.replaced(a)
}

// followStagger schedules the evaluation that goes on with the rollout once
// the group's stagger has passed, if the stagger held something back.
func (g *groupReconciler) followStagger() {
	if g.staggerUntil > 0 && g.outdated > 0 {
		g.later.add(droverv1.EvalTrigger_EVAL_TRIGGER_DEPLOYMENT, g.staggerUntil, nil)
	}
}

// complete reports whether the group's rollout is over: its canaries
// promoted, nothing left to replace, update or place, and as many healthy
// allocations as it wants.
func (g *groupReconciler) complete() bool {
	d := g.ch.desired
	return !g.awaitingPromotion() && len(g.surging) == 0 &&
		g.outdated == 0 && d.place == 0 && d.inplace == 0 && d.destructive == 0 &&
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
