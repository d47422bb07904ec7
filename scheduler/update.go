package scheduler

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// allocUpdateKind is what moving an allocation to the current job version
// takes.
type allocUpdateKind int

const (
	// updateNone: the allocation already runs the current version.
	updateNone allocUpdateKind = iota
	// updateInPlace: only fields that do not affect placement or the running
	// tasks changed (count, reschedule and disconnect settings, meta): the
	// allocation keeps its id, node and resources and moves to the new
	// version.
	updateInPlace
	// updateDestructive: the allocation must be stopped and replaced.
	updateDestructive
)

// allocUpdate says how to move an allocation to job's version. An older
// version that is no longer stored cannot be compared, so the allocation is
// replaced.
func allocUpdate(a *droverv1.Allocation, job *droverv1.Job, jobVersion func(uint64) *droverv1.Job) allocUpdateKind {
	if a.GetJobVersion() == job.GetVersion() {
		return updateNone
	}
	var old *droverv1.Job
	if jobVersion != nil {
		old = jobVersion(a.GetJobVersion())
	}
	if old == nil || tasksUpdated(old, job, a.GetTaskGroup()) {
		return updateDestructive
	}
	return updateInPlace
}

// tasksUpdated reports whether an allocation of group placed for oldJob
// must be replaced to run newJob: the group's resources, constraints,
// spreads or tasks changed, or the job's datacenters or constraints did, so
// the allocation's node or its running tasks may no longer be right. Order
// does not matter in any of these lists.
func tasksUpdated(oldJob, newJob *droverv1.Job, group string) bool {
	a, b := oldJob.LookupTaskGroup(group), newJob.LookupTaskGroup(group)
	if a == nil || b == nil {
		return true
	}
	switch {
	case !sameElements(oldJob.GetDatacenters(), newJob.GetDatacenters(), func(x, y string) bool { return x == y }):
		return true
	case !sameElements(oldJob.GetConstraints(), newJob.GetConstraints(), (*droverv1.Constraint).EqualVT):
		return true
	case !a.GetResources().EqualVT(b.GetResources()):
		return true
	case !sameElements(a.GetConstraints(), b.GetConstraints(), (*droverv1.Constraint).EqualVT):
		return true
	case !sameElements(a.GetSpreads(), b.GetSpreads(), (*droverv1.Spread).EqualVT):
		return true
	case !sameElements(a.GetTasks(), b.GetTasks(), (*droverv1.Task).EqualVT):
		return true
	}
	return false
}

// sameElements reports whether two short lists hold the same elements, as
// multisets.
func sameElements[T any](a, b []T, eq func(T, T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	matched := make([]bool, len(b))
	for _, x := range a {
		found := false
		for j, y := range b {
			if !matched[j] && eq(x, y) {
				matched[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
