package droverv1

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Defaults of a task group's update block (see UpdateStrategy in job.proto).
const (
	DefaultUpdateMaxParallel      = 1
	DefaultUpdateMinHealthyTime   = 10 * time.Second
	DefaultUpdateHealthyDeadline  = 5 * time.Minute
	DefaultUpdateProgressDeadline = 10 * time.Minute
)

// defaultUpdateStrategy is the complete block a group gets when neither it
// nor its job sets a field.
func defaultUpdateStrategy() *UpdateStrategy {
	return &UpdateStrategy{
		MaxParallel:      proto.Int32(DefaultUpdateMaxParallel),
		MinHealthyTime:   durationpb.New(DefaultUpdateMinHealthyTime),
		HealthyDeadline:  durationpb.New(DefaultUpdateHealthyDeadline),
		ProgressDeadline: durationpb.New(DefaultUpdateProgressDeadline),
		AutoRevert:       proto.Bool(false),
		Canary:           proto.Int32(0),
		AutoPromote:      proto.Bool(false),
		Stagger:          durationpb.New(0),
		Surge:            proto.Bool(false),
	}
}

// canonicalUpdate is a group's complete update block: the job's fields,
// then the group's laid on top, then the defaults for what neither sets.
func canonicalUpdate(job, group *UpdateStrategy) *UpdateStrategy {
	u := defaultUpdateStrategy()
	u.overlay(job)
	u.overlay(group)
	return u
}

// overlay copies every field set in o onto u.
func (u *UpdateStrategy) overlay(o *UpdateStrategy) {
	if o == nil {
		return
	}
	if o.MaxParallel != nil {
		u.MaxParallel = proto.Int32(*o.MaxParallel)
	}
	if o.MinHealthyTime != nil {
		u.MinHealthyTime = cloneDuration(o.MinHealthyTime)
	}
	if o.HealthyDeadline != nil {
		u.HealthyDeadline = cloneDuration(o.HealthyDeadline)
	}
	if o.ProgressDeadline != nil {
		u.ProgressDeadline = cloneDuration(o.ProgressDeadline)
	}
	if o.AutoRevert != nil {
		u.AutoRevert = proto.Bool(*o.AutoRevert)
	}
	if o.Canary != nil {
		u.Canary = proto.Int32(*o.Canary)
	}
	if o.AutoPromote != nil {
		u.AutoPromote = proto.Bool(*o.AutoPromote)
	}
	if o.Stagger != nil {
		u.Stagger = cloneDuration(o.Stagger)
	}
	if o.Surge != nil {
		u.Surge = proto.Bool(*o.Surge)
	}
}

// UsesDeployments reports whether a group with this block rolls new
// versions out through a deployment: it has a block and max_parallel is not
// 0.
func (u *UpdateStrategy) UsesDeployments() bool {
	return u != nil && u.GetMaxParallel() > 0
}

// cloneDuration copies d as given, invalid or not, for Validate to judge.
func cloneDuration(d *durationpb.Duration) *durationpb.Duration {
	return &durationpb.Duration{Seconds: d.GetSeconds(), Nanos: d.GetNanos()}
}

// Warnings lists what a canonical job does that is allowed but likely not
// meant. They are returned with a registration, never refused.
func (j *Job) Warnings() []string {
	var out []string
	for _, tg := range j.GetTaskGroups() {
		u := tg.GetUpdate()
		if n := tg.GetCount(); n > 1 && u.GetMaxParallel() > n {
			out = append(out, fmt.Sprintf("task group %q: update.max_parallel %d is more than count %d: a new version replaces every allocation at once",
				tg.GetName(), u.GetMaxParallel(), n))
		}
		if c := u.GetCanary(); c > 0 && c > tg.GetCount() {
			out = append(out, fmt.Sprintf("task group %q: update.canary %d is more than count %d: promotion stops every allocation of the old version at once",
				tg.GetName(), c, tg.GetCount()))
		}
	}
	return out
}
