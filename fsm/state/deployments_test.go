package state

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// deploymentOf returns a new deployment of the job's current version for
// its first group.
func deploymentOf(j *droverv1.Job, total, canaries int32) *droverv1.Deployment {
	return &droverv1.Deployment{
		Id: mock.ID(), JobId: j.GetId(), JobVersion: j.GetVersion(), JobCreateIndex: j.GetCreateIndex(),
		JobModifyIndex: j.GetJobModifyIndex(),
		Groups: map[string]*droverv1.DeploymentGroup{j.GetTaskGroups()[0].GetName(): {
			DesiredTotal: total, DesiredCanaries: canaries, ProgressDeadline: durationpb.New(10 * time.Minute),
			// What a plan says of the counters the servers own is ignored.
			PlacedAllocs: 99, HealthyAllocs: 99,
		}},
	}
}

// placeIn writes allocations into a deployment through a plan result that
// also carries the deployment.
func (f *fixture) placeIn(d *droverv1.Deployment, canary bool, allocs ...*droverv1.Allocation) {
	f.t.Helper()
	e := &droverv1.PlanResultEntry{AppliedAt: 100, Deployment: d.CloneVT()}
	for _, a := range allocs {
		c := a.CloneVT()
		c.DeploymentId = d.GetId()
		c.DeploymentStatus = &droverv1.AllocDeploymentStatus{Canary: canary}
		e.Allocations = append(e.Allocations, c)
	}
	if _, err := f.s.UpsertPlanResults(f.next(), e); err != nil {
		f.t.Fatalf("place into deployment: %v", err)
	}
}

func (f *fixture) reportHealth(nodeID string, healthy bool, at int64, allocIDs ...string) {
	f.t.Helper()
	group := &droverv1.NodeAllocUpdates{NodeId: nodeID}
	for _, id := range allocIDs {
		group.Allocs = append(group.Allocs, &droverv1.AllocClientUpdate{AllocId: id,
			ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, Healthy: proto.Bool(healthy), HealthTimestamp: at})
	}
	if _, _, err := f.s.UpdateAllocsFromClient(f.next(), &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{group}, UpdatedAt: at}); err != nil {
		f.t.Fatalf("report health: %v", err)
	}
}

func (f *fixture) group(id string) *droverv1.DeploymentGroup {
	d := f.s.Snapshot().DeploymentByID(id)
	for _, g := range d.GetGroups() {
		return g
	}
	return nil
}

func TestDeploymentCountsPlacementsAndHealth(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	j := f.job(3)
	d := deploymentOf(j, 3, 0)
	allocs := []*droverv1.Allocation{mock.Alloc(n, j, 0), mock.Alloc(n, j, 1)}
	f.placeIn(d, false, allocs...)

	stored := f.s.Snapshot().DeploymentByID(d.GetId())
	if stored.GetStatus() != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING || stored.GetCreateIndex() != f.index {
		t.Fatalf("new deployment: %v", stored)
	}
	g := f.group(d.GetId())
	if g.GetPlacedAllocs() != 2 || g.GetHealthyAllocs() != 0 || g.GetRequireProgressBy() != 100+int64(10*time.Minute) {
		t.Errorf("after 2 placements: %v, want placed 2, healthy 0, progress deadline from the first placement", g)
	}

	f.reportHealth(n.GetId(), true, 200, allocs[0].GetId())
	f.reportHealth(n.GetId(), false, 300, allocs[1].GetId())
	g = f.group(d.GetId())
	if g.GetHealthyAllocs() != 1 || g.GetUnhealthyAllocs() != 1 || g.GetRequireProgressBy() != 200+int64(10*time.Minute) {
		t.Errorf("after one healthy and one unhealthy report: %v", g)
	}
	a := f.s.Snapshot().AllocByID(allocs[0].GetId())
	if !a.GetDeploymentStatus().GetHealthy() || a.GetDeploymentStatus().GetTimestamp() != 200 || a.GetDeploymentStatus().GetModifyIndex() == 0 {
		t.Errorf("allocation health: %v", a.GetDeploymentStatus())
	}
	// The same report again counts nothing; a change moves the count.
	f.reportHealth(n.GetId(), true, 250, allocs[0].GetId())
	f.reportHealth(n.GetId(), true, 400, allocs[1].GetId())
	if g = f.group(d.GetId()); g.GetHealthyAllocs() != 2 || g.GetUnhealthyAllocs() != 0 {
		t.Errorf("after a repeated report and a change to healthy: %v", g)
	}

	// An allocation of the deployment the plan sent without a status (as
	// an in-place update may) takes a report too.
	bare := mock.Alloc(n, j, 3)
	bare.DeploymentId = d.GetId()
	f.place(bare)
	f.reportHealth(n.GetId(), true, 450, bare.GetId())
	if g = f.group(d.GetId()); g.GetHealthyAllocs() != 3 || g.GetPlacedAllocs() != 3 {
		t.Errorf("after a report on an allocation placed without a status: %v", g)
	}

	// A later plan of the scheduler keeps what the servers counted.
	again := deploymentOf(j, 3, 0)
	again.Id = d.GetId()
	f.placeIn(again, false, mock.Alloc(n, j, 2))
	if g = f.group(d.GetId()); g.GetPlacedAllocs() != 4 || g.GetHealthyAllocs() != 3 {
		t.Errorf("after the scheduler's next plan: %v", g)
	}

	// A replacement placed late in the rollout reports its health only
	// after the deployment ended.
	late := mock.Alloc(n, j, 4)
	late.DeploymentId = d.GetId()
	f.place(late)

	// Success makes the job version stable; then nothing changes the
	// deployment.
	if _, err := f.s.UpdateDeploymentStatus(f.next(), &droverv1.DeploymentStatusUpdateEntry{UpdatedAt: 500,
		Updates: []*droverv1.DeploymentStatusUpdate{{DeploymentId: d.GetId(), Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL}}}); err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot()
	if !snap.JobByID(j.GetId()).GetStable() || !snap.JobVersion(j.GetId(), j.GetVersion()).GetStable() {
		t.Errorf("job version not stable after a successful deployment")
	}
	if _, err := f.s.UpdateDeploymentStatus(f.next(), &droverv1.DeploymentStatusUpdateEntry{UpdatedAt: 600,
		Updates: []*droverv1.DeploymentStatusUpdate{{DeploymentId: d.GetId(), Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED}}}); err != nil {
		t.Fatal(err)
	}
	if st := f.s.Snapshot().DeploymentByID(d.GetId()).GetStatus(); st != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL {
		t.Errorf("a terminal deployment changed to %s", st)
	}
	// Health reports after the end change nothing.
	f.reportHealth(n.GetId(), false, 700, allocs[0].GetId())
	f.reportHealth(n.GetId(), true, 800, late.GetId())
	if g = f.group(d.GetId()); g.GetHealthyAllocs() != 3 {
		t.Errorf("a report after the end was counted: %v", g)
	}
	// The allocations still record what their agent said.
	snap = f.s.Snapshot()
	if st := snap.AllocByID(late.GetId()).GetDeploymentStatus(); !st.GetHealthy() || st.GetTimestamp() != 800 {
		t.Errorf("late allocation's health after the end: %v, want healthy at 800", st)
	}
	if st := snap.AllocByID(allocs[0].GetId()).GetDeploymentStatus(); st.GetHealthy() || st.GetTimestamp() != 700 {
		t.Errorf("allocation's health after the end: %v, want unhealthy at 700", st)
	}
}

func TestPromoteDeployment(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	j := f.job(2)
	d := deploymentOf(j, 2, 2)
	canary, second := mock.Alloc(n, j, 0), mock.Alloc(n, j, 1)
	f.placeIn(d, true, canary, second)
	if g := f.group(d.GetId()); len(g.GetPlacedCanaries()) != 2 {
		t.Fatalf("placed canaries %v, want both canaries", g.GetPlacedCanaries())
	}
	promote := func() error {
		_, err := f.s.PromoteDeployment(f.next(), &droverv1.DeploymentPromoteEntry{DeploymentId: d.GetId(), PromotedAt: 1000,
			Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)})
		return err
	}
	if err := promote(); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("promoting unhealthy canaries: %v, want ErrPrecondition", err)
	}
	f.reportHealth(n.GetId(), true, 900, canary.GetId())
	if err := promote(); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("promoting with 1 of 2 canaries healthy: %v, want ErrPrecondition", err)
	}
	// A stopped canary is not checked, but still missing.
	f.stopAllocs(false, second)
	if err := promote(); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("promoting with the other canary stopped: %v, want ErrPrecondition", err)
	}
	third := mock.Alloc(n, j, 1)
	f.placeIn(d, true, third)
	f.reportHealth(n.GetId(), true, 950, third.GetId())
	if err := promote(); err != nil {
		t.Fatalf("promote: %v", err)
	}
	g := f.group(d.GetId())
	if !g.GetPromoted() || g.GetRequireProgressBy() != 1000+int64(10*time.Minute) {
		t.Errorf("after promotion: %v", g)
	}
	if f.s.Snapshot().AllocByID(canary.GetId()).GetDeploymentStatus().GetCanary() {
		t.Errorf("the promoted canary is still marked canary")
	}
	if err := promote(); !errors.Is(err, ErrPrecondition) {
		t.Errorf("promoting again: %v, want ErrPrecondition (nothing left to promote)", err)
	}
	if _, err := f.s.PromoteDeployment(f.next(), &droverv1.DeploymentPromoteEntry{DeploymentId: mock.ID()}); !errors.Is(err, ErrNotFound) {
		t.Errorf("promoting an unknown deployment: %v, want ErrNotFound", err)
	}
}

func TestDeploymentGC(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	j := f.job(1)
	live, done := deploymentOf(j, 1, 0), deploymentOf(j, 1, 0)
	f.placeIn(live, false, mock.Alloc(n, j, 0))
	f.placeIn(done, false)
	if _, err := f.s.UpdateDeploymentStatus(f.next(), &droverv1.DeploymentStatusUpdateEntry{
		Updates: []*droverv1.DeploymentStatusUpdate{{DeploymentId: done.GetId(), Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_CANCELLED}}}); err != nil {
		t.Fatal(err)
	}
	res, _, err := f.s.ApplyGC(f.next(), &droverv1.GCEntry{DeploymentIds: []string{live.GetId(), done.GetId()}})
	if err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot()
	if res.Deployments != 1 || snap.DeploymentByID(done.GetId()) != nil || snap.DeploymentByID(live.GetId()) == nil {
		t.Errorf("GC deleted %d deployments; want only the cancelled one gone", res.Deployments)
	}
	if got := snap.LatestDeployment(j.GetId()); got.GetId() != live.GetId() {
		t.Errorf("latest deployment %s, want %s", got.GetId(), live.GetId())
	}
}

// TestDeploymentCountsReportsOfOneEntry applies one entry of health reports
// into two deployments, one allocation reported twice: each deployment
// counts every report in order, and is written once at the entry's index.
func TestDeploymentCountsReportsOfOneEntry(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	j1, j2 := f.job(3), f.job(1)
	d1, d2 := deploymentOf(j1, 3, 0), deploymentOf(j2, 1, 0)
	allocs := []*droverv1.Allocation{mock.Alloc(n, j1, 0), mock.Alloc(n, j1, 1), mock.Alloc(n, j1, 2)}
	other := mock.Alloc(n, j2, 0)
	f.placeIn(d1, false, allocs...)
	f.placeIn(d2, false, other)

	report := func(a *droverv1.Allocation, healthy bool, at int64) *droverv1.AllocClientUpdate {
		return &droverv1.AllocClientUpdate{AllocId: a.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING,
			Healthy: proto.Bool(healthy), HealthTimestamp: at}
	}
	group := &droverv1.NodeAllocUpdates{NodeId: n.GetId(), Allocs: []*droverv1.AllocClientUpdate{
		report(allocs[0], true, 200),
		report(allocs[1], true, 210),
		report(other, true, 220),
		report(allocs[1], false, 230), // the same allocation again, in the same entry
		report(allocs[2], true, 240),
	}}
	if _, _, err := f.s.UpdateAllocsFromClient(f.next(), &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{group}, UpdatedAt: 300}); err != nil {
		t.Fatalf("report health: %v", err)
	}

	tests := []struct {
		name               string
		deployment         string
		healthy, unhealthy int32
		progressFrom       int64
	}{
		{"reported twice", d1.GetId(), 2, 1, 240},
		{"another rollout", d2.GetId(), 1, 0, 220},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := f.group(tt.deployment)
			if g.GetHealthyAllocs() != tt.healthy || g.GetUnhealthyAllocs() != tt.unhealthy ||
				g.GetRequireProgressBy() != tt.progressFrom+int64(10*time.Minute) {
				t.Errorf("group %v, want healthy %d, unhealthy %d, progress deadline from %d", g, tt.healthy, tt.unhealthy, tt.progressFrom)
			}
			d := f.s.Snapshot().DeploymentByID(tt.deployment)
			if d.GetModifyIndex() != f.index || d.GetModifyTime() != 300 {
				t.Errorf("deployment modified at index %d, time %d; want the entry's %d, 300", d.GetModifyIndex(), d.GetModifyTime(), f.index)
			}
		})
	}
}
