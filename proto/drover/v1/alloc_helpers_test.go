package droverv1

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Short names for the statuses the helpers branch on.
const (
	csPending = AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	csRunning = AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	csUnknown = AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
	csLost    = AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
	csDone    = AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	dsRun     = AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
	dsStop    = AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP
	dsEvict   = AllocDesiredStatus_ALLOC_DESIRED_STATUS_EVICT
)

// clientState is an AllocState entry recording client status s at time t.
func clientState(s AllocClientStatus, t int64) *AllocState {
	return &AllocState{Field: AllocStateField_ALLOC_STATE_FIELD_CLIENT_STATUS, ClientStatus: s, Time: t}
}

func TestMarkUnknown(t *testing.T) {
	earlier := clientState(csUnknown, 10)
	a := &Allocation{
		Id: "a1", DesiredStatus: dsRun, ClientStatus: csRunning, ClientDescription: "tasks running",
		AllocStates: []*AllocState{earlier, clientState(csRunning, 20)},
	}
	a.MarkUnknown(30)

	if a.GetClientStatus() != csUnknown || a.GetClientDescription() != ClientDescriptionUnknown {
		t.Errorf("client status %s %q, want unknown %q", a.GetClientStatus(), a.GetClientDescription(), ClientDescriptionUnknown)
	}
	if a.GetDesiredStatus() != dsRun {
		t.Errorf("desired status = %s, want run: the servers' wish is not the agent's status", a.GetDesiredStatus())
	}
	want := []*AllocState{earlier, clientState(csRunning, 20), clientState(csUnknown, 30)}
	if len(a.GetAllocStates()) != len(want) {
		t.Fatalf("alloc states = %v, want %v", a.GetAllocStates(), want)
	}
	for i := range want {
		if !proto.Equal(a.GetAllocStates()[i], want[i]) {
			t.Errorf("alloc state %d = %v, want %v", i, a.GetAllocStates()[i], want[i])
		}
	}
	if got := a.UnknownSince(); got != 30 {
		t.Errorf("UnknownSince after MarkUnknown = %d, want 30", got)
	}
}

func TestDisconnectable(t *testing.T) {
	withMCD := &Job{TaskGroups: []*TaskGroup{{Name: "web", MaxClientDisconnect: durationpb.New(time.Duration(60))}, {Name: "db"}}}
	cases := []struct {
		name    string
		desired AllocDesiredStatus
		client  AllocClientStatus
		group   string
		job     *Job
		want    bool
	}{
		{"running with max_client_disconnect", dsRun, csRunning, "web", withMCD, true},
		{"pending", dsRun, csPending, "web", withMCD, false},
		{"already unknown", dsRun, csUnknown, "web", withMCD, false},
		{"complete", dsRun, csDone, "web", withMCD, false},
		{"lost", dsRun, csLost, "web", withMCD, false},
		{"wanted stopped", dsStop, csRunning, "web", withMCD, false},
		{"evicted", dsEvict, csRunning, "web", withMCD, false},
		{"group without max_client_disconnect", dsRun, csRunning, "db", withMCD, false},
		{"group not in the job version", dsRun, csRunning, "cache", withMCD, false},
		{"job version unknown", dsRun, csRunning, "web", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &Allocation{Id: "a1", TaskGroup: tc.group, DesiredStatus: tc.desired, ClientStatus: tc.client}
			if got := a.Disconnectable(tc.job); got != tc.want {
				t.Errorf("Disconnectable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnknownSince(t *testing.T) {
	other := &AllocState{Field: AllocStateField_ALLOC_STATE_FIELD_UNSPECIFIED, Time: 99}
	unset := clientState(AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED, 98)
	cases := []struct {
		name   string
		states []*AllocState
		want   int64
	}{
		{"no entries", nil, 0},
		{"never unknown", []*AllocState{clientState(csRunning, 5)}, 0},
		{"unknown", []*AllocState{clientState(csUnknown, 10)}, 10},
		{"trailing run gives its oldest", []*AllocState{clientState(csUnknown, 10), clientState(csUnknown, 20)}, 10},
		{"reconnected", []*AllocState{clientState(csUnknown, 10), clientState(csRunning, 20)}, 0},
		{"unknown again after a reconnect", []*AllocState{clientState(csUnknown, 10), clientState(csRunning, 20), clientState(csUnknown, 30)}, 30},
		{"lost after unknown", []*AllocState{clientState(csUnknown, 10), clientState(csLost, 20)}, 0},
		{"other fields skipped", []*AllocState{clientState(csUnknown, 10), other}, 10},
		{"entries without a status skipped", []*AllocState{clientState(csRunning, 5), clientState(csUnknown, 10), unset, clientState(csUnknown, 20)}, 10},
		{"skipped entries do not end the run", []*AllocState{clientState(csUnknown, 10), other, unset, clientState(csUnknown, 20)}, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &Allocation{Id: "a1", AllocStates: tc.states}
			if got := a.UnknownSince(); got != tc.want {
				t.Errorf("UnknownSince = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDisconnectDeadline(t *testing.T) {
	const now = int64(1_000)
	unknownAt := func(t int64) []*AllocState { return []*AllocState{clientState(csUnknown, t)} }
	cases := []struct {
		name   string
		states []*AllocState
		window int64
		want   int64
	}{
		{"window after the unknown entry", unknownAt(400), 100, 500},
		{"window ending after now", unknownAt(950), 100, 1_050},
		{"oldest of the trailing unknown run", []*AllocState{clientState(csUnknown, 300), clientState(csUnknown, 700)}, 100, 400},
		{"no unknown entry: window starts now", nil, 100, now + 100},
		{"reconnected since: window starts now", []*AllocState{clientState(csUnknown, 300), clientState(csRunning, 350)}, 100, now + 100},
		{"no window: the moment it became unknown", unknownAt(400), 0, 400},
		{"huge window saturates", unknownAt(400), math.MaxInt64, math.MaxInt64},
		{"huge window from now saturates", nil, math.MaxInt64 - now + 1, math.MaxInt64},
		{"largest window that fits", unknownAt(400), math.MaxInt64 - 400, math.MaxInt64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &Allocation{Id: "a1", ClientStatus: csUnknown, AllocStates: tc.states}
			if got := a.DisconnectDeadline(tc.window, now); got != tc.want {
				t.Errorf("DisconnectDeadline(%d, %d) = %d, want %d", tc.window, now, got, tc.want)
			}
		})
	}
}
