package droverv1

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
)

// DefaultJobPriority is the priority of a job that does not set one.
const DefaultJobPriority = 50

// Default reschedule policies, by job type: services keep trying with a
// growing delay; batch work retries once a day.
func defaultReschedulePolicy(t JobType) *ReschedulePolicy {
	switch t {
	case JobType_JOB_TYPE_SERVICE:
		return &ReschedulePolicy{
			Delay:         durationpb.New(30 * time.Second),
			DelayFunction: DelayFunction_DELAY_FUNCTION_EXPONENTIAL,
			MaxDelay:      durationpb.New(time.Hour),
			Unlimited:     true,
		}
	case JobType_JOB_TYPE_BATCH:
		return &ReschedulePolicy{
			Attempts:      1,
			Interval:      durationpb.New(24 * time.Hour),
			Delay:         durationpb.New(5 * time.Second),
			DelayFunction: DelayFunction_DELAY_FUNCTION_CONSTANT,
		}
	}
	return nil
}

// Canonicalize fills in the defaults of an operator's job specification so
// that the stored job says explicitly how it behaves. It is called before
// Validate, on a job the caller owns. Durations a client built before 0.3
// sent in the legacy nanosecond fields are moved into their Duration
// fields first, so that validation sees them.
func (j *Job) Canonicalize() {
	j.UpgradeLegacyDurations()
	if j.Type == JobType_JOB_TYPE_UNSPECIFIED {
		j.Type = JobType_JOB_TYPE_SERVICE
	}
	if j.Name == "" {
		j.Name = j.Id
	}
	if j.Priority == 0 {
		j.Priority = DefaultJobPriority
	}
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue
		}
		if j.Type == JobType_JOB_TYPE_SYSTEM {
			// A system job runs once per eligible node; count means nothing.
			tg.Count = 1
		}
		if tg.ReschedulePolicy == nil {
			tg.ReschedulePolicy = defaultReschedulePolicy(j.Type)
		}
		if j.Type != JobType_JOB_TYPE_BATCH {
			// Batch jobs keep what they were given, for Validate to refuse.
			tg.Update = canonicalUpdate(j.Update, tg.Update)
		}
		if tg.ReconnectStrategy == ReconnectStrategy_RECONNECT_STRATEGY_UNSPECIFIED {
			tg.ReconnectStrategy = ReconnectStrategy_RECONNECT_STRATEGY_BEST_SCORE
		}
		for _, s := range tg.Spreads {
			if s != nil && s.Weight == 0 {
				s.Weight = DefaultJobPriority
			}
		}
	}
}

// ClearServerFields resets the fields the servers own, so that values sent
// by a client are never stored.
func (j *Job) ClearServerFields() {
	j.Stop = false
	j.Status = JobStatus_JOB_STATUS_UNSPECIFIED
	j.Version = 0
	j.CreateIndex = 0
	j.ModifyIndex = 0
	j.JobModifyIndex = 0
	j.SubmitTime = 0
	j.Stable = false
}

// Supersedes reports whether registering j when old is stored (nil: no job
// of that id) makes a new version: old is missing, stopped, or has another
// specification.
func (j *Job) Supersedes(old *Job) bool {
	return old == nil || old.GetStop() || !old.SpecEqual(j)
}

// BecomeNextVersion sets the server-owned fields of j, registered at raft
// index with submission time submittedAt, as the version after old (nil:
// the first). The status is left for the caller, who knows the
// allocations.
func (j *Job) BecomeNextVersion(old *Job, index uint64, submittedAt int64) {
	j.ClearServerFields()
	j.CreateIndex = index
	if old != nil {
		j.Version = old.GetVersion() + 1
		j.CreateIndex = old.GetCreateIndex()
	}
	j.JobModifyIndex = index
	j.ModifyIndex = index
	j.SubmitTime = submittedAt
}

// LookupTaskGroup returns the group named name, or nil.
func (j *Job) LookupTaskGroup(name string) *TaskGroup {
	for _, tg := range j.GetTaskGroups() {
		if tg.GetName() == name {
			return tg
		}
	}
	return nil
}

// SpecEqual reports whether two jobs have the same specification, ignoring
// the fields the servers own. Registering an unchanged specification does
// not create a new job version.
func (j *Job) SpecEqual(other *Job) bool {
	a, b := j.CloneVT(), other.CloneVT()
	a.ClearServerFields()
	b.ClearServerFields()
	return a.EqualVT(b)
}

// Finished reports whether the job wants nothing more to run: stopped, or
// a batch job whose work is done (dead).
func (j *Job) Finished() bool {
	return j.GetStop() || (j.GetType() == JobType_JOB_TYPE_BATCH && j.GetStatus() == JobStatus_JOB_STATUS_DEAD)
}
