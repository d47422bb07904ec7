package droverv1

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
)

// maxUpdateDuration bounds every duration of an update block: a rollout
// step that waits longer than a week is a typo, not a plan.
const maxUpdateDuration = 7 * 24 * time.Hour

// validateUpdate checks an update block, the job's or a group's. Ranges are
// checked for every field that is set; relations between two fields when
// both are, which they always are in a canonical group block.
func validateUpdate(v *violations, field string, jobType JobType, u *UpdateStrategy) {
	if u == nil {
		return
	}
	if jobType == JobType_JOB_TYPE_BATCH {
		v.add(field, "is not allowed on batch jobs: their allocations run to completion and are never rolled out")
		return
	}
	mp, canary := u.GetMaxParallel(), u.GetCanary()
	if mp < 0 || mp > maxGroupCount {
		v.add(field+".max_parallel", "must be from 0 to %d", maxGroupCount)
	}
	if canary < 0 || canary > maxGroupCount {
		v.add(field+".canary", "must be from 0 to %d", maxGroupCount)
	}
	minHealthy, minSet := updateDuration(v, field+".min_healthy_time", u.GetMinHealthyTime())
	healthy, healthySet := updateDuration(v, field+".healthy_deadline", u.GetHealthyDeadline())
	progress, progressSet := updateDuration(v, field+".progress_deadline", u.GetProgressDeadline())
	updateDuration(v, field+".stagger", u.GetStagger())

	if u.MaxParallel != nil && mp == 0 {
		// Nomad silently ignores canaries here; an operator who asked for
		// them would not expect every allocation replaced at once.
		if canary > 0 {
			v.add(field+".canary", "needs max_parallel of at least 1: with max_parallel 0 a new version replaces every allocation at once, with no canaries")
		}
		if u.GetSurge() {
			v.add(field+".surge", "needs max_parallel of at least 1: with max_parallel 0 a new version replaces every allocation at once")
		}
	}
	if u.GetAutoPromote() && u.Canary != nil && canary == 0 {
		v.add(field+".auto_promote", "needs canary of at least 1: there is nothing to promote")
	}
	if jobType == JobType_JOB_TYPE_SYSTEM {
		if canary > 0 {
			v.add(field+".canary", "is not supported for system jobs: every eligible node runs exactly one allocation")
		}
		if u.GetSurge() {
			v.add(field+".surge", "is not supported for system jobs: a node runs one allocation of the group, never two")
		}
	}
	if healthySet && healthy == 0 {
		v.add(field+".healthy_deadline", "must be positive")
	}
	if minSet && healthySet && minHealthy >= healthy {
		v.add(field+".min_healthy_time", "must be less than healthy_deadline (%s)", healthy)
	}
	if healthySet && progressSet && progress != 0 && healthy >= progress {
		v.add(field+".healthy_deadline", "must be less than progress_deadline (%s), or progress_deadline 0", progress)
	}
}

// updateDuration checks one duration of an update block and returns it,
// with whether it is set.
func updateDuration(v *violations, field string, d *durationpb.Duration) (time.Duration, bool) {
	if d == nil {
		return 0, false
	}
	if err := d.CheckValid(); err != nil {
		v.add(field, "is not a valid duration: %v", err)
		return 0, false
	}
	x := d.AsDuration()
	if x < 0 || x > maxUpdateDuration {
		v.add(field, "must be from 0s to %s", maxUpdateDuration)
		return 0, false
	}
	return x, true
}

// validateAutoPromote checks that the groups of a job with canaries agree
// on auto_promote: a deployment is promoted as a whole, so one group that
// waits for an operator would hold back the others.
func validateAutoPromote(v *violations, groups []*TaskGroup) {
	var auto, manual []string
	for _, tg := range groups {
		if tg.GetUpdate().GetCanary() == 0 {
			continue
		}
		if tg.GetUpdate().GetAutoPromote() {
			auto = append(auto, tg.GetName())
		} else {
			manual = append(manual, tg.GetName())
		}
	}
	if len(auto) > 0 && len(manual) > 0 {
		v.add("job.task_groups", "auto_promote must be the same on every group with canaries: %s promote by themselves, %s wait for an operator",
			fmt.Sprint(auto), fmt.Sprint(manual))
	}
}
