package test_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// running counts, entry by entry from the event stream, the allocations of
// a job the servers want running, whose agents run them and reported them
// healthy in their deployment.
type running struct {
	mu     sync.Mutex
	allocs map[string]*droverv1.Allocation
	// floor and peak are the fewest and most seen running after armed,
	// floor -1 before.
	floor, peak int
	armed       bool
}

func (r *running) entry(resp *droverv1.StreamEventsResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range resp.GetEvents() {
		if a := ev.GetAllocation(); a != nil {
			r.allocs[a.GetId()] = a
		}
	}
	if !r.armed {
		return
	}
	n := r.countLocked()
	if r.floor < 0 || n < r.floor {
		r.floor = n
	}
	r.peak = max(r.peak, n)
}

// arm starts counting afresh.
func (r *running) arm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed, r.floor, r.peak = true, -1, 0
}

// bounds returns the fewest and most seen running since arm.
func (r *running) bounds() (floor, peak int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.floor, r.peak
}

func (r *running) countLocked() int {
	n := 0
	for _, a := range r.allocs {
		if a.GetDesiredStatus() == droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN &&
			a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING && a.GetDeploymentStatus().GetHealthy() {
			n++
		}
	}
	return n
}

// TestRollingUpdate rolls a new version of a 10-allocation group out with
// max_parallel 2 on 3 servers and simulated agents, and checks from the
// event stream, raft entry by raft entry, that never fewer than 8 healthy
// allocations run; the rollout ends with 10 healthy allocations of the new
// version and the deployment successful. A second version rolled out with
// surge never runs fewer than 10.
func TestRollingUpdate(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := testContext(t)
	leader := c.WaitLeader(ctx)
	waitRecorded(ctx, t, c)
	fleet := startSimFleet(ctx, t, c, 6, func(cfg *simagent.Config) {
		cfg.HeartbeatOnly = false
		cfg.StartDelay = 50 * time.Millisecond
		cfg.HealthDelay = 300 * time.Millisecond
	})
	waitFleetReady(ctx, t, fleet)

	job := mock.Job(10)
	job.TaskGroups[0].Resources.Ports = nil
	job.TaskGroups[0].Update = &droverv1.UpdateStrategy{MaxParallel: proto.Int32(2), MinHealthyTime: durationpb.New(300 * time.Millisecond)}
	conn := leader.Conn()
	jobs := droverv1.NewJobServiceClient(conn)
	deployments := droverv1.NewDeploymentServiceClient(conn)
	r := &running{allocs: make(map[string]*droverv1.Allocation), floor: -1}
	follower := followEntries(ctx, conn, 1, []droverv1.Topic{droverv1.Topic_TOPIC_ALLOCATION}, r.entry)
	t.Cleanup(follower.stop)

	deployed := func(version uint64) *droverv1.Deployment {
		var d *droverv1.Deployment
		poll(ctx, t, fmt.Sprintf("deployment of version %d successful", version), func() (bool, string) {
			resp, err := deployments.List(ctx, &droverv1.ListDeploymentsRequest{JobId: job.GetId()})
			if err != nil || len(resp.GetDeployments()) == 0 {
				return false, fmt.Sprint(err)
			}
			d = resp.GetDeployments()[0]
			return d.GetJobVersion() == version && d.GetStatus() == droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL,
				fmt.Sprintf("latest deployment: version %d %s %v", d.GetJobVersion(), d.GetStatus(), d.GetGroups())
		})
		return d
	}
	if _, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: job.CloneVT()}); err != nil {
		t.Fatal(err)
	}
	deployed(0)

	// rollOut registers the job changed by edit as version, and returns
	// the fewest and most healthy allocations seen running, entry by
	// entry, until its deployment succeeded.
	rollOut := func(version uint64, edit func(*droverv1.Job)) (floor, peak int) {
		edit(job)
		resp, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: job.CloneVT()})
		if err != nil {
			t.Fatal(err)
		}
		if err := follower.waitFor(ctx, resp.GetIndex()); err != nil {
			t.Fatal(err)
		}
		r.arm()
		d := deployed(version)
		if g := d.GetGroups()[job.TaskGroups[0].GetName()]; g.GetHealthyAllocs() < 10 || g.GetDesiredTotal() != 10 {
			t.Errorf("deployment group at the end: %v", g)
		}
		got, err := jobs.Get(ctx, &droverv1.GetJobRequest{JobId: job.GetId()})
		if err != nil || !got.GetJob().GetStable() {
			t.Errorf("version %d not stable after its deployment succeeded: %v", version, err)
		}
		return r.bounds()
	}
	floor, _ := rollOut(1, func(j *droverv1.Job) { j.TaskGroups[0].Resources.MemoryMb *= 2 })
	if floor < 8 {
		t.Errorf("at some raft entry only %d healthy allocations ran during the rollout, want at least 8 (count 10, max_parallel 2)", floor)
	}
	t.Logf("fewest healthy running during the rollout: %d", floor)

	// With surge, the old allocations stop only once their replacements
	// are healthy: never fewer than 10, and up to 12 at once.
	floor, peak := rollOut(2, func(j *droverv1.Job) {
		j.TaskGroups[0].Resources.MemoryMb *= 2
		j.TaskGroups[0].Update.Surge = proto.Bool(true)
	})
	if floor < 10 || peak > 12 || peak == 10 {
		t.Errorf("surge rollout: between %d and %d healthy allocations ran, want never fewer than 10 and at most 12 (some above 10)", floor, peak)
	}
	t.Logf("surge rollout: between %d and %d healthy running", floor, peak)
}
