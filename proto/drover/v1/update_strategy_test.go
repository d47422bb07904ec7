package droverv1_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// TestCanonicalUpdate checks how a group's update block is made complete:
// the job's fields, then the group's, then the defaults.
func TestCanonicalUpdate(t *testing.T) {
	defaults := &droverv1.UpdateStrategy{
		MaxParallel: proto.Int32(1), MinHealthyTime: dur(10 * time.Second), HealthyDeadline: dur(5 * time.Minute),
		ProgressDeadline: dur(10 * time.Minute), AutoRevert: proto.Bool(false), Canary: proto.Int32(0),
		AutoPromote: proto.Bool(false), Stagger: dur(0), Surge: proto.Bool(false),
	}
	with := func(edit func(u *droverv1.UpdateStrategy)) *droverv1.UpdateStrategy {
		u := defaults.CloneVT()
		edit(u)
		return u
	}
	tests := []struct {
		name       string
		jobType    droverv1.JobType
		job, group *droverv1.UpdateStrategy
		want       *droverv1.UpdateStrategy
	}{
		{"neither sets one", droverv1.JobType_JOB_TYPE_SERVICE, nil, nil, defaults},
		{"job only", droverv1.JobType_JOB_TYPE_SERVICE,
			&droverv1.UpdateStrategy{MaxParallel: proto.Int32(3), AutoRevert: proto.Bool(true)}, nil,
			with(func(u *droverv1.UpdateStrategy) { u.MaxParallel, u.AutoRevert = proto.Int32(3), proto.Bool(true) })},
		{"group fields over the job's", droverv1.JobType_JOB_TYPE_SERVICE,
			&droverv1.UpdateStrategy{MaxParallel: proto.Int32(3), Canary: proto.Int32(1)},
			&droverv1.UpdateStrategy{MaxParallel: proto.Int32(2), MinHealthyTime: dur(time.Second)},
			with(func(u *droverv1.UpdateStrategy) {
				u.MaxParallel, u.Canary, u.MinHealthyTime = proto.Int32(2), proto.Int32(1), dur(time.Second)
			})},
		{"an explicit zero is kept", droverv1.JobType_JOB_TYPE_SERVICE,
			&droverv1.UpdateStrategy{MaxParallel: proto.Int32(4)}, &droverv1.UpdateStrategy{MaxParallel: proto.Int32(0)},
			with(func(u *droverv1.UpdateStrategy) { u.MaxParallel = proto.Int32(0) })},
		{"system jobs get one too", droverv1.JobType_JOB_TYPE_SYSTEM, nil, nil, defaults},
		{"batch jobs get none", droverv1.JobType_JOB_TYPE_BATCH, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := mock.Job(2)
			j.Type, j.Update, j.TaskGroups[0].Update = tt.jobType, tt.job, tt.group
			j.Canonicalize()
			if got := j.TaskGroups[0].GetUpdate(); !proto.Equal(got, tt.want) {
				t.Errorf("group update = %v, want %v", got, tt.want)
			}
			if !proto.Equal(j.GetUpdate(), tt.job) {
				t.Errorf("the job's own block changed to %v, want it as submitted", j.GetUpdate())
			}
			again := j.CloneVT()
			again.Canonicalize()
			if !again.SpecEqual(j) {
				t.Errorf("canonicalizing twice changed the job: %v", again)
			}
		})
	}
}

// TestUpdateValidation refuses every update block that cannot mean what it
// says, naming the field.
func TestUpdateValidation(t *testing.T) {
	tests := []struct {
		name    string
		jobType droverv1.JobType
		job     *droverv1.UpdateStrategy
		group   *droverv1.UpdateStrategy
		field   string // empty: accepted
	}{
		{"defaults", droverv1.JobType_JOB_TYPE_SERVICE, nil, nil, ""},
		{"rolling with canaries", droverv1.JobType_JOB_TYPE_SERVICE, nil,
			&droverv1.UpdateStrategy{MaxParallel: proto.Int32(2), Canary: proto.Int32(2), AutoPromote: proto.Bool(true), Surge: proto.Bool(true)}, ""},
		{"all at once", droverv1.JobType_JOB_TYPE_SERVICE, nil, &droverv1.UpdateStrategy{MaxParallel: proto.Int32(0)}, ""},
		{"progress deadline 0", droverv1.JobType_JOB_TYPE_SERVICE, nil, &droverv1.UpdateStrategy{ProgressDeadline: dur(0)}, ""},
		{"negative max_parallel", droverv1.JobType_JOB_TYPE_SERVICE, nil, &droverv1.UpdateStrategy{MaxParallel: proto.Int32(-1)}, "job.task_groups[0].update.max_parallel"},
		{"canary with max_parallel 0", droverv1.JobType_JOB_TYPE_SERVICE, nil,
			&droverv1.UpdateStrategy{MaxParallel: proto.Int32(0), Canary: proto.Int32(1)}, "job.task_groups[0].update.canary"},
		{"canary with the job's max_parallel 0", droverv1.JobType_JOB_TYPE_SERVICE,
			&droverv1.UpdateStrategy{MaxParallel: proto.Int32(0)}, &droverv1.UpdateStrategy{Canary: proto.Int32(1)}, "job.task_groups[0].update.canary"},
		{"surge with max_parallel 0", droverv1.JobType_JOB_TYPE_SERVICE, nil,
			&droverv1.UpdateStrategy{MaxParallel: proto.Int32(0), Surge: proto.Bool(true)}, "job.task_groups[0].update.surge"},
		{"auto_promote without canary", droverv1.JobType_JOB_TYPE_SERVICE, nil, &droverv1.UpdateStrategy{AutoPromote: proto.Bool(true)}, "job.task_groups[0].update.auto_promote"},
		{"negative canary", droverv1.JobType_JOB_TYPE_SERVICE, nil, &droverv1.UpdateStrategy{Canary: proto.Int32(-2)}, "job.task_groups[0].update.canary"},
		{"min healthy over the deadline", droverv1.JobType_JOB_TYPE_SERVICE, nil,
			&droverv1.UpdateStrategy{MinHealthyTime: dur(time.Minute), HealthyDeadline: dur(time.Minute)}, "job.task_groups[0].update.min_healthy_time"},
		{"healthy deadline over the progress deadline", droverv1.JobType_JOB_TYPE_SERVICE, nil,
			&droverv1.UpdateStrategy{HealthyDeadline: dur(20 * time.Minute)}, "job.task_groups[0].update.healthy_deadline"},
		{"zero healthy deadline", droverv1.JobType_JOB_TYPE_SERVICE, nil,
			&droverv1.UpdateStrategy{MinHealthyTime: dur(0), HealthyDeadline: dur(0)}, "job.task_groups[0].update.healthy_deadline"},
		{"negative duration", droverv1.JobType_JOB_TYPE_SERVICE, nil, &droverv1.UpdateStrategy{Stagger: dur(-time.Second)}, "job.task_groups[0].update.stagger"},
		{"duration beyond a week", droverv1.JobType_JOB_TYPE_SERVICE, nil, &droverv1.UpdateStrategy{ProgressDeadline: dur(200 * time.Hour)}, "job.task_groups[0].update.progress_deadline"},
		{"malformed duration", droverv1.JobType_JOB_TYPE_SERVICE, nil,
			&droverv1.UpdateStrategy{Stagger: &durationpb.Duration{Seconds: 1, Nanos: -5}}, "job.task_groups[0].update.stagger"},
		{"bad job block", droverv1.JobType_JOB_TYPE_SERVICE, &droverv1.UpdateStrategy{MaxParallel: proto.Int32(-3)}, nil, "job.update.max_parallel"},
		{"batch job block", droverv1.JobType_JOB_TYPE_BATCH, &droverv1.UpdateStrategy{}, nil, "job.update"},
		{"batch group block", droverv1.JobType_JOB_TYPE_BATCH, nil, &droverv1.UpdateStrategy{}, "job.task_groups[0].update"},
		{"system canary", droverv1.JobType_JOB_TYPE_SYSTEM, nil, &droverv1.UpdateStrategy{Canary: proto.Int32(1)}, "job.task_groups[0].update.canary"},
		{"system surge", droverv1.JobType_JOB_TYPE_SYSTEM, nil, &droverv1.UpdateStrategy{Surge: proto.Bool(true)}, "job.task_groups[0].update.surge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := mock.Job(2)
			j.Type, j.Update, j.TaskGroups[0].Update = tt.jobType, tt.job, tt.group
			j.Canonicalize()
			err := (&droverv1.RegisterJobRequest{Job: j}).Validate()
			checkViolation(t, err, tt.field)
		})
	}
}

// TestAutoPromoteAgrees refuses a job whose canary groups disagree on
// auto_promote.
func TestAutoPromoteAgrees(t *testing.T) {
	j := mock.Job(2)
	second := j.TaskGroups[0].CloneVT()
	second.Name = "other"
	j.TaskGroups = append(j.TaskGroups, second)
	j.TaskGroups[0].Update = &droverv1.UpdateStrategy{Canary: proto.Int32(1), AutoPromote: proto.Bool(true)}
	j.TaskGroups[1].Update = &droverv1.UpdateStrategy{Canary: proto.Int32(1)}
	j.Canonicalize()
	checkViolation(t, (&droverv1.RegisterJobRequest{Job: j}).Validate(), "job.task_groups")

	j.TaskGroups[1].Update.AutoPromote = proto.Bool(true)
	checkViolation(t, (&droverv1.RegisterJobRequest{Job: j}).Validate(), "")
}

// checkViolation wants err to name field, or nil when field is empty.
func checkViolation(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var verr *droverv1.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("err = %v, want a validation error naming %s", err, field)
	}
	if !strings.Contains(err.Error(), field+":") {
		t.Errorf("err = %v, want it to name %s", err, field)
	}
}
