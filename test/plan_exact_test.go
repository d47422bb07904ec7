package test_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestPlanIsExact walks one job through a table of changes on a 3-server
// cluster. For each, JobService.Plan (asked of a follower, which forwards it
// to the leader) predicts what the scheduler will do; the change is then
// registered with the plan's index as enforce_index, and what the
// evaluation did to the allocations must equal the prediction.
func TestPlanIsExact(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	readyNodes(ctx, t, leader.Conn(), 4)
	// Checked registrations are written once every server has announced
	// its release.
	waitRecorded(ctx, t, c)
	c.WaitConverged(ctx)
	jobs := droverv1.NewJobServiceClient(leader.Conn())
	planner := droverv1.NewJobServiceClient(follower.Conn())

	job := mock.Job(3)
	job.TaskGroups[0].Resources.Ports = nil
	// Unpaced: no agent here reports health, which a rollout waits for.
	job.TaskGroups[0].Update.MaxParallel = proto.Int32(0)
	steps := []struct {
		name  string
		edit  func(j *droverv1.Job)
		want  *droverv1.DesiredUpdates
		block bool
	}{
		{"new job", func(*droverv1.Job) {}, &droverv1.DesiredUpdates{Place: 3}, false},
		{"unchanged", func(*droverv1.Job) {}, &droverv1.DesiredUpdates{Ignore: 3}, false},
		// A new count is a new version: the allocations kept move to it
		// in place.
		{"scale up", func(j *droverv1.Job) { j.TaskGroups[0].Count = 5 }, &droverv1.DesiredUpdates{Place: 2, InPlaceUpdate: 3}, false},
		{"meta: in place", func(j *droverv1.Job) { j.TaskGroups[0].Meta = map[string]string{"team": "web"} }, &droverv1.DesiredUpdates{InPlaceUpdate: 5}, false},
		{"resources: replace", func(j *droverv1.Job) { j.TaskGroups[0].Resources.MemoryMb = 256 }, &droverv1.DesiredUpdates{DestructiveUpdate: 5}, false},
		{"scale down", func(j *droverv1.Job) { j.TaskGroups[0].Count = 2 }, &droverv1.DesiredUpdates{Stop: 3, InPlaceUpdate: 2}, false},
		{"too big to place", func(j *droverv1.Job) { j.TaskGroups[0].Resources.CpuMhz = 100_000 }, &droverv1.DesiredUpdates{DestructiveUpdate: 2}, true},
	}
	for _, step := range steps {
		step.edit(job)
		plan, err := planner.Plan(ctx, &droverv1.PlanJobRequest{Job: job.CloneVT()})
		if err != nil {
			t.Fatalf("%s: plan: %v", step.name, err)
		}
		got := plan.GetDesiredUpdates()[job.TaskGroups[0].GetName()]
		if !proto.Equal(got, step.want) {
			t.Errorf("%s: plan predicts %v, want %v", step.name, got, step.want)
		}
		if blocked := len(plan.GetPlacementFailures()) > 0 && plan.GetWouldBlock(); blocked != step.block {
			t.Errorf("%s: plan says placement failures %v, would block %v; want blocked %v", step.name, plan.GetPlacementFailures(), plan.GetWouldBlock(), step.block)
		}

		before, err := jobAllocs(ctx, leader.Conn(), job.GetId())
		if err != nil {
			t.Fatal(err)
		}
		reg, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: job.CloneVT(), EnforceIndex: proto.Uint64(plan.GetJobModifyIndex())})
		if err != nil {
			t.Fatalf("%s: register with the plan's index %d: %v", step.name, plan.GetJobModifyIndex(), err)
		}
		if _, err := waitEvalDone(ctx, droverv1.NewEvalServiceClient(leader.Conn()), reg.GetEvalId(), reg.GetIndex()); err != nil {
			t.Fatal(err)
		}
		after, err := jobAllocs(ctx, leader.Conn(), job.GetId())
		if err != nil {
			t.Fatal(err)
		}
		if did := allocChanges(before, after); !sameChanges(did, got, plan.GetPlacementFailures()) {
			t.Errorf("%s: the evaluation placed %d, stopped %d and updated %d in place; the plan predicted %v",
				step.name, did.placed, did.stopped, did.inPlace, got)
		}
	}
}

// changes is what an evaluation did to a job's allocations.
type changes struct{ placed, stopped, inPlace int }

// allocChanges compares the job's allocations before and after an
// evaluation.
func allocChanges(before, after []*droverv1.Allocation) changes {
	old := make(map[string]*droverv1.Allocation, len(before))
	for _, a := range before {
		old[a.GetId()] = a
	}
	var c changes
	running := func(a *droverv1.Allocation) bool {
		return a.GetDesiredStatus() == droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
	}
	for _, a := range after {
		prev, existed := old[a.GetId()]
		switch {
		case !existed:
			c.placed++
		case running(prev) && !running(a):
			c.stopped++
		case running(a) && prev.GetJobVersion() != a.GetJobVersion():
			c.inPlace++
		}
	}
	return c
}

// sameChanges reports whether what happened is what the plan predicted: a
// destructive update is a placement and a stop, and what the plan could
// not place is not placed. In this table only replacements fail to
// place, and a replacement not placed stops nothing.
func sameChanges(did changes, plan *droverv1.DesiredUpdates, failures []*droverv1.PlacementFailure) bool {
	var unplaced int32
	for _, f := range failures {
		unplaced += f.GetUnplaced()
	}
	kept := min(unplaced, plan.GetDestructiveUpdate())
	return did.placed == int(plan.GetPlace()+plan.GetDestructiveUpdate()+plan.GetMigrate()-unplaced) &&
		did.stopped == int(plan.GetStop()+plan.GetDestructiveUpdate()+plan.GetMigrate()-kept) &&
		did.inPlace == int(plan.GetInPlaceUpdate())
}
