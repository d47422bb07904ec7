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
// a job the servers want running and whose agents run them.
type running struct {
	mu     sync.Mutex
	allocs map[string]*droverv1.Allocation
	// floor is the fewest seen running after armed, -1 before.
	floor int
	armed bool
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
	if n := r.countLocked(); r.floor < 0 || n < r.floor {
		r.floor = n
	}
}

func (r *running) countLocked() int {
	n := 0
	for _, a := range r.allocs {
		if a.GetDesiredStatus() == droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN &&
			a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING {
			n++
		}
	}
	return n
}

// TestRollingUpdate rolls a new version of a 10-allocation group out with
// max_parallel 2 on 3 servers and simulated agents, and checks from the
// event stream, raft entry by raft entry, that never fewer than 8
// allocations run; the rollout ends with 10 healthy allocations of the new
// version and the deployment successful.
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
	job.Update = &droverv1.UpdateStrategy{MaxParallel: proto.Int32(2), MinHealthyTime: durationpb.New(300 * time.Millisecond)}
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

	reg := job.CloneVT()
	reg.TaskGroups[0].Resources.MemoryMb *= 2
	resp, err := jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.waitFor(ctx, resp.GetIndex()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.armed = true
	r.mu.Unlock()
	d := deployed(1)
	g := d.GetGroups()[job.TaskGroups[0].GetName()]
	if g.GetHealthyAllocs() < 10 || g.GetDesiredTotal() != 10 {
		t.Errorf("deployment group at the end: %v", g)
	}
	got, err := jobs.Get(ctx, &droverv1.GetJobRequest{JobId: job.GetId()})
	if err != nil || !got.GetJob().GetStable() {
		t.Errorf("version 1 not stable after its deployment succeeded: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.floor < 8 {
		t.Errorf("at some raft entry only %d allocations ran during the rollout, want at least 8 (count 10, max_parallel 2)", r.floor)
	}
	t.Logf("fewest running during the rollout: %d", r.floor)
}
