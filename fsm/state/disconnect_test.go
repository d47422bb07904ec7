package state

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// disconnectedAt is the updated_at of the entries that disconnect a node.
const disconnectedAt = int64(1234)

// mcdJob registers a mock job of one allocation whose group sets
// max_client_disconnect to mcd, and returns it as stored.
func (f *fixture) mcdJob(mcd time.Duration) *droverv1.Job {
	f.t.Helper()
	j := mock.Job(1)
	j.TaskGroups[0].MaxClientDisconnect = durationpb.New(mcd)
	f.register(j)
	return f.s.Snapshot().JobByID(j.GetId())
}

// updateJob registers a new version of job with the group's
// max_client_disconnect set to mcd.
func (f *fixture) updateJob(job *droverv1.Job, mcd time.Duration) {
	f.t.Helper()
	j := job.CloneVT()
	j.TaskGroups[0].MaxClientDisconnect = durationpb.New(mcd)
	j.TaskGroups[0].Meta = map[string]string{"version": "next"}
	f.register(j)
	if v := f.s.Snapshot().JobByID(job.GetId()).GetVersion(); v != job.GetVersion()+1 {
		f.t.Fatalf("job %s version = %d after update, want %d", job.GetId(), v, job.GetVersion()+1)
	}
}

// disconnect writes the node's status as disconnected and returns the
// entry's index and changes.
func (f *fixture) disconnect(nodeID string) (uint64, []Change) {
	f.t.Helper()
	index := f.next()
	changes, err := f.s.UpdateNodeStatus(index, &droverv1.NodeStatusEntry{
		NodeId: nodeID, Status: disconnected, StatusDescription: "missed heartbeats", UpdatedAt: disconnectedAt,
	})
	if err != nil {
		f.t.Fatalf("disconnect node %s: %v", nodeID, err)
	}
	return index, changes
}

// A node's disconnect marks unknown, in the same write, exactly the
// allocations that may outlive it: wanted running, reported running, and
// of a group that sets max_client_disconnect in the job version they run.
func TestDisconnectMarksAllocsUnknown(t *testing.T) {
	const hour = time.Hour
	cases := []struct {
		name string
		// mcd is the group's max_client_disconnect in the version the
		// allocation runs; current, if different, in the job's newer version.
		mcd, current time.Duration
		client       droverv1.AllocClientStatus
		stopped      bool
		wantUnknown  bool
	}{
		{name: "running with max_client_disconnect", mcd: hour, current: hour, client: running, wantUnknown: true},
		{name: "pending", mcd: hour, current: hour, client: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING},
		{name: "no max_client_disconnect", client: running},
		{name: "wanted stopped", mcd: hour, current: hour, client: running, stopped: true},
		{name: "complete", mcd: hour, current: hour, client: complete},
		{name: "version run sets it, current does not", mcd: hour, client: running, wantUnknown: true},
		{name: "current sets it, version run does not", current: hour, client: running},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			f.setStatus(n.GetId(), ready)
			job := f.mcdJob(tc.mcd)
			a := f.place(mock.Alloc(n, job, 0))[0]
			if tc.current != tc.mcd {
				f.updateJob(job, tc.current)
			}
			if tc.client != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING {
				f.report(n.GetId(), tc.client, a.GetId())
			}
			if tc.stopped {
				stop := &droverv1.PlanResultEntry{Stops: []*droverv1.AllocStop{{AllocId: a.GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP}}}
				if _, err := f.s.UpsertPlanResults(f.next(), stop); err != nil {
					t.Fatal(err)
				}
			}
			before := f.s.Snapshot().AllocByID(a.GetId())
			_, nodeSetBefore := f.s.Snapshot().AllocsByNode(n.GetId())

			index, changes := f.disconnect(n.GetId())

			snap := f.s.Snapshot()
			after := snap.AllocByID(a.GetId())
			allocChanged := slices.ContainsFunc(changes, func(c Change) bool { return c.Table == TableAllocs })
			_, nodeSetAfter := snap.AllocsByNode(n.GetId())
			if !tc.wantUnknown {
				if !proto.Equal(after, before) || allocChanged {
					t.Errorf("allocation changed by the disconnect: %v -> %v", before, after)
				}
				if nodeSetAfter != nodeSetBefore {
					t.Errorf("node's alloc index moved %d -> %d without a change", nodeSetBefore, nodeSetAfter)
				}
				return
			}
			if after.GetClientStatus() != unknown || after.GetClientDescription() != droverv1.ClientDescriptionUnknown {
				t.Errorf("client status = %s %q, want unknown", after.GetClientStatus(), after.GetClientDescription())
			}
			if after.GetDesiredStatus() != before.GetDesiredStatus() {
				t.Errorf("desired status %s -> %s", before.GetDesiredStatus(), after.GetDesiredStatus())
			}
			states := after.GetAllocStates()
			wantState := &droverv1.AllocState{Field: droverv1.AllocStateField_ALLOC_STATE_FIELD_CLIENT_STATUS, ClientStatus: unknown, Time: disconnectedAt}
			if len(states) != len(before.GetAllocStates())+1 || !proto.Equal(states[len(states)-1], wantState) {
				t.Errorf("alloc states = %v, want one more: %v", states, wantState)
			}
			if after.GetAllocModifyIndex() != index || after.GetModifyIndex() != index || after.GetModifyTime() != disconnectedAt {
				t.Errorf("alloc modify index %d, modify index %d, modify time %d; want %d, %d, %d",
					after.GetAllocModifyIndex(), after.GetModifyIndex(), after.GetModifyTime(), index, index, disconnectedAt)
			}
			if after.UnknownSince() != disconnectedAt {
				t.Errorf("UnknownSince = %d, want %d", after.UnknownSince(), disconnectedAt)
			}
			if !allocChanged {
				t.Errorf("changes %v do not report the allocation", changes)
			}
			// A server-side change: an agent blocked in GetAllocs must wake.
			if nodeSetAfter != index {
				t.Errorf("node's alloc index = %d, want %d", nodeSetAfter, index)
			}
			// Unknown is not terminal: the allocation keeps its address and
			// its job keeps running.
			if !snap.AllocIPHeld(after.GetResources().GetIp()) {
				t.Errorf("unknown allocation released its address")
			}
			if got := snap.JobByID(job.GetId()).GetStatus(); got != droverv1.JobStatus_JOB_STATUS_RUNNING {
				t.Errorf("job status = %s, want running", got)
			}
		})
	}
}

// Only the write that disconnects a node marks its allocations: later
// writes of the same status, a node going down, and an allocation still
// unknown from an earlier disconnect add no entry.
func TestDisconnectMarksOncePerDisconnect(t *testing.T) {
	type step int
	const (
		toReady step = iota
		toDown
		toDisconnected
		reportRunning
	)
	cases := []struct {
		name        string
		steps       []step
		wantEntries int
		wantStatus  droverv1.AllocClientStatus
	}{
		{"disconnected", []step{toDisconnected}, 1, unknown},
		{"disconnected twice", []step{toDisconnected, toDisconnected}, 1, unknown},
		{"down", []step{toDown}, 0, running},
		{"back, still unknown, disconnected again", []step{toDisconnected, toReady, toDisconnected}, 1, unknown},
		{"back, reported running, disconnected again", []step{toDisconnected, toReady, reportRunning, toDisconnected}, 2, unknown},
		{"disconnected then down", []step{toDisconnected, toDown}, 1, unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			f.setStatus(n.GetId(), ready)
			job := f.mcdJob(time.Hour)
			a := f.place(mock.Alloc(n, job, 0))[0]
			f.report(n.GetId(), running, a.GetId())
			var lastMark uint64
			for _, s := range tc.steps {
				switch s {
				case toReady:
					f.setStatus(n.GetId(), ready)
				case toDown:
					f.setStatus(n.GetId(), down)
				case toDisconnected:
					before := f.s.Snapshot().AllocByID(a.GetId()).GetAllocStates()
					index, _ := f.disconnect(n.GetId())
					if len(f.s.Snapshot().AllocByID(a.GetId()).GetAllocStates()) > len(before) {
						lastMark = index
					}
				case reportRunning:
					f.report(n.GetId(), running, a.GetId())
				}
			}
			got := f.s.Snapshot().AllocByID(a.GetId())
			entries := 0
			for _, s := range got.GetAllocStates() {
				if s.GetClientStatus() == unknown {
					entries++
				}
			}
			if entries != tc.wantEntries || got.GetClientStatus() != tc.wantStatus {
				t.Errorf("client status %s with %d unknown entries (%v), want %s with %d",
					got.GetClientStatus(), entries, got.GetAllocStates(), tc.wantStatus, tc.wantEntries)
			}
			if tc.wantEntries > 0 && got.GetAllocModifyIndex() != lastMark {
				t.Errorf("alloc modify index = %d, want %d, the write that last marked it", got.GetAllocModifyIndex(), lastMark)
			}
		})
	}
}

// Disconnecting a node marks its allocations of every job, and no other
// node's.
func TestDisconnectMarksOnlyItsNode(t *testing.T) {
	f := newFixture(t)
	n, other := f.node(), f.node()
	f.setStatus(n.GetId(), ready)
	f.setStatus(other.GetId(), ready)
	j1, j2 := f.mcdJob(time.Hour), f.mcdJob(time.Minute)
	mine := f.place(mock.Alloc(n, j1, 0), mock.Alloc(n, j2, 1))
	theirs := f.place(mock.Alloc(other, j1, 2))[0]
	f.report(n.GetId(), running, mine[0].GetId(), mine[1].GetId())
	f.report(other.GetId(), running, theirs.GetId())

	f.disconnect(n.GetId())
	snap := f.s.Snapshot()
	for _, a := range mine {
		if got := snap.AllocByID(a.GetId()).GetClientStatus(); got != unknown {
			t.Errorf("allocation %s of job %s on the disconnected node: %s, want unknown", a.GetId(), a.GetJobId(), got)
		}
	}
	if got := snap.AllocByID(theirs.GetId()).GetClientStatus(); got != running {
		t.Errorf("allocation on another node: %s, want running", got)
	}
}
