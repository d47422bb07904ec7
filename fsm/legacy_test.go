package fsm

import (
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestUpgradeLegacy checks that every raft entry and snapshot record that
// can hold a duration written by a release before 0.3 is upgraded, and that
// others are left alone.
func TestUpgradeLegacy(t *testing.T) {
	legacyJob := func() *droverv1.Job {
		return &droverv1.Job{Id: "web", TaskGroups: []*droverv1.TaskGroup{{Name: "g", MaxClientDisconnectNs: int64(time.Minute)}}}
	}
	legacyAlloc := func() *droverv1.Allocation {
		return &droverv1.Allocation{RescheduleTracker: &droverv1.RescheduleTracker{Events: []*droverv1.RescheduleEvent{{DelayNs: int64(time.Second)}}}}
	}
	legacyDeployment := func() *droverv1.Deployment {
		return &droverv1.Deployment{Groups: map[string]*droverv1.DeploymentGroup{"g": {ProgressDeadlineNs: int64(time.Minute)}}}
	}
	jobUpgraded := func(j *droverv1.Job) bool {
		tg := j.GetTaskGroups()[0]
		return tg.GetMaxClientDisconnect().AsDuration() == time.Minute && tg.GetMaxClientDisconnectNs() == 0
	}
	allocUpgraded := func(a *droverv1.Allocation) bool {
		e := a.GetRescheduleTracker().GetEvents()[0]
		return e.GetDelay().AsDuration() == time.Second && e.GetDelayNs() == 0
	}
	deploymentUpgraded := func(d *droverv1.Deployment) bool {
		g := d.GetGroups()["g"]
		return g.GetProgressDeadline().AsDuration() == time.Minute && g.GetProgressDeadlineNs() == 0
	}

	tests := []struct {
		name     string
		msg      any
		upgraded func(any) bool
	}{
		{"job register entry", &droverv1.JobRegisterEntry{Job: legacyJob()},
			func(m any) bool { return jobUpgraded(m.(*droverv1.JobRegisterEntry).GetJob()) }},
		{"revert of a deployment status entry", &droverv1.DeploymentStatusUpdateEntry{Revert: &droverv1.JobRegisterEntry{Job: legacyJob()}},
			func(m any) bool { return jobUpgraded(m.(*droverv1.DeploymentStatusUpdateEntry).GetRevert().GetJob()) }},
		{"plan result entry", &droverv1.PlanResultEntry{Allocations: []*droverv1.Allocation{legacyAlloc()}, Deployment: legacyDeployment()},
			func(m any) bool {
				e := m.(*droverv1.PlanResultEntry)
				return allocUpgraded(e.GetAllocations()[0]) && deploymentUpgraded(e.GetDeployment())
			}},
		{"job record", legacyJob(), func(m any) bool { return jobUpgraded(m.(*droverv1.Job)) }},
		{"allocation record", legacyAlloc(), func(m any) bool { return allocUpgraded(m.(*droverv1.Allocation)) }},
		{"deployment record", legacyDeployment(), func(m any) bool { return deploymentUpgraded(m.(*droverv1.Deployment)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !upgradeLegacy(tt.msg) {
				t.Error("reported no legacy durations")
			}
			if !tt.upgraded(tt.msg) {
				t.Errorf("not upgraded: %v", tt.msg)
			}
			if upgradeLegacy(tt.msg) {
				t.Error("a second pass found legacy durations again")
			}
		})
	}
	if upgradeLegacy(&droverv1.NodeStatusEntry{}) || upgradeLegacy(&droverv1.PlanResultEntry{}) {
		t.Error("entries without legacy durations reported some")
	}
}
