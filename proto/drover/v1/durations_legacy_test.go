package droverv1

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestUpgradeLegacyDurations(t *testing.T) {
	tests := []struct {
		name    string
		in      *TaskGroup
		want    *TaskGroup
		changed bool
	}{
		{"nothing set", &TaskGroup{}, &TaskGroup{}, false},
		{"new fields only", &TaskGroup{MaxClientDisconnect: durationpb.New(time.Minute)},
			&TaskGroup{MaxClientDisconnect: durationpb.New(time.Minute)}, false},
		{"legacy fields only",
			&TaskGroup{MaxClientDisconnectNs: int64(5 * time.Minute), StopAfterClientDisconnectNs: int64(time.Minute),
				ReschedulePolicy: &ReschedulePolicy{Attempts: 2, IntervalNs: int64(time.Hour), DelayNs: int64(time.Second), MaxDelayNs: int64(time.Minute)}},
			&TaskGroup{MaxClientDisconnect: durationpb.New(5 * time.Minute), StopAfterClientDisconnect: durationpb.New(time.Minute),
				ReschedulePolicy: &ReschedulePolicy{Attempts: 2, Interval: durationpb.New(time.Hour), Delay: durationpb.New(time.Second), MaxDelay: durationpb.New(time.Minute)}},
			true},
		{"both set: the new field wins, the legacy one is cleared",
			&TaskGroup{MaxClientDisconnect: durationpb.New(time.Minute), MaxClientDisconnectNs: int64(time.Hour)},
			&TaskGroup{MaxClientDisconnect: durationpb.New(time.Minute)}, true},
		{"negative legacy value is kept for validation to refuse",
			&TaskGroup{ReschedulePolicy: &ReschedulePolicy{DelayNs: -1}},
			&TaskGroup{ReschedulePolicy: &ReschedulePolicy{Delay: durationpb.New(-1)}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &Job{Id: "j", TaskGroups: []*TaskGroup{tt.in}}
			if got := job.UpgradeLegacyDurations(); got != tt.changed {
				t.Errorf("changed = %v, want %v", got, tt.changed)
			}
			if !proto.Equal(job.GetTaskGroups()[0], tt.want) {
				t.Errorf("got %v, want %v", job.GetTaskGroups()[0], tt.want)
			}
		})
	}
}

func TestUpgradeLegacyDurationsStored(t *testing.T) {
	d := &Deployment{Groups: map[string]*DeploymentGroup{"web": {ProgressDeadlineNs: int64(7 * time.Minute)}}}
	if !d.UpgradeLegacyDurations() || d.GetGroups()["web"].GetProgressDeadline().AsDuration() != 7*time.Minute ||
		d.GetGroups()["web"].GetProgressDeadlineNs() != 0 {
		t.Errorf("deployment after upgrade: %v", d)
	}
	a := &Allocation{RescheduleTracker: &RescheduleTracker{Events: []*RescheduleEvent{{DelayNs: int64(2 * time.Second)}, {}}}}
	if !a.UpgradeLegacyDurations() || a.GetRescheduleTracker().GetEvents()[0].GetDelay().AsDuration() != 2*time.Second ||
		a.GetRescheduleTracker().GetEvents()[0].GetDelayNs() != 0 || a.GetRescheduleTracker().GetEvents()[1].GetDelay() != nil {
		t.Errorf("allocation after upgrade: %v", a)
	}
	var nilAlloc *Allocation
	if nilAlloc.UpgradeLegacyDurations() || (*Job)(nil).UpgradeLegacyDurations() || (*Deployment)(nil).UpgradeLegacyDurations() {
		t.Error("nil messages report a change")
	}
}

func TestEffectiveDurations(t *testing.T) {
	tests := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"max_wait", (&QueryOptions{MaxWait: durationpb.New(time.Second)}).EffectiveMaxWait(), time.Second},
		{"legacy max_wait", (&QueryOptions{MaxWaitNs: int64(time.Minute)}).EffectiveMaxWait(), time.Minute},
		{"both: max_wait wins", (&QueryOptions{MaxWait: durationpb.New(time.Second), MaxWaitNs: int64(time.Minute)}).EffectiveMaxWait(), time.Second},
		{"nil options", (*QueryOptions)(nil).EffectiveMaxWait(), 0},
		{"legacy max_stale", (&QueryOptions{MaxStaleNs: int64(time.Second)}).EffectiveMaxStale(), time.Second},
		{"GetAllocs legacy max_wait", (&GetAllocsRequest{MaxWaitNs: int64(time.Minute)}).EffectiveMaxWait(), time.Minute},
		{"GetAllocs max_wait", (&GetAllocsRequest{MaxWait: durationpb.New(time.Second)}).EffectiveMaxWait(), time.Second},
		{"drain legacy deadline", (&UpdateNodeDrainRequest{DeadlineNs: int64(time.Hour)}).EffectiveDeadline(), time.Hour},
		{"drain deadline", (&UpdateNodeDrainRequest{Deadline: durationpb.New(time.Minute)}).EffectiveDeadline(), time.Minute},
		{"last contact", (&ServerInfoResponse{LastContact: durationpb.New(time.Millisecond), LastContactNs: int64(time.Millisecond)}).EffectiveLastContact(), time.Millisecond},
		{"last contact of an old leader", (&ServerInfoResponse{}).EffectiveLastContact(), 0},
		{"old server never heard from a leader", (&ServerInfoResponse{LastContactNs: -1}).EffectiveLastContact(), -1},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %s, want %s", tt.name, tt.got, tt.want)
		}
	}
}

func TestSetLegacyResponseFields(t *testing.T) {
	reg := &RegisterNodeResponse{}
	reg.SetHeartbeatTTL(15 * time.Second)
	beat := &UpdateNodeStatusResponse{}
	beat.SetHeartbeatTTL(12*time.Second + 345678901)
	if reg.GetHeartbeatTtl().AsDuration() != 15*time.Second || reg.GetHeartbeatTtlNs() != int64(15*time.Second) ||
		beat.GetHeartbeatTtl().AsDuration() != 12345*time.Millisecond || beat.GetHeartbeatTtlNs() != int64(12345*time.Millisecond) {
		t.Errorf("heartbeat TTLs: register %v, heartbeat %v; want both fields set", reg, beat)
	}
	never := &ServerInfoResponse{}
	never.SetLastContact(-1)
	if never.GetLastContact() != nil || never.GetLastContactNs() != -1 || never.EffectiveLastContact() >= 0 {
		t.Errorf("never heard from a leader: %v", never)
	}
	leader := &ServerInfoResponse{}
	leader.SetLastContact(0)
	if leader.GetLastContact() == nil || leader.EffectiveLastContact() != 0 {
		t.Errorf("leader: %v", leader)
	}
}
