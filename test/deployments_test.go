package test_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server/deploy"
	"github.com/droverhq/drover/test/cluster"
)

// deployClients are the clients a deployment test drives the cluster with.
type deployClients struct {
	jobs        droverv1.JobServiceClient
	deployments droverv1.DeploymentServiceClient
	nodes       droverv1.NodeServiceClient
}

func newDeployClients(conn grpc.ClientConnInterface) deployClients {
	return deployClients{droverv1.NewJobServiceClient(conn), droverv1.NewDeploymentServiceClient(conn), droverv1.NewNodeServiceClient(conn)}
}

// rolloutJob is a service job of 10 allocations rolled out 2 at a time.
func rolloutJob(id string) *droverv1.Job {
	job := mock.Job(10)
	job.Id, job.Name = id, id
	job.TaskGroups[0].Resources.Ports = nil
	// mock.Job gives the group a complete block, which a job-level one
	// would not override.
	job.TaskGroups[0].Update = &droverv1.UpdateStrategy{MaxParallel: proto.Int32(2), MinHealthyTime: durationpb.New(300 * time.Millisecond)}
	return job
}

// nextVersion is job with a change that replaces its allocations.
func nextVersion(job *droverv1.Job) *droverv1.Job {
	next := job.CloneVT()
	next.TaskGroups[0].Resources.MemoryMb++
	return next
}

func (dc deployClients) register(ctx context.Context, t testing.TB, job *droverv1.Job) uint64 {
	t.Helper()
	resp, err := dc.jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: job.CloneVT()})
	if err != nil {
		t.Fatalf("register %s: %v", job.GetId(), err)
	}
	return resp.GetIndex()
}

// waitDeployment waits until the job's newest deployment of version
// passes check, and returns it.
func (dc deployClients) waitDeployment(ctx context.Context, t testing.TB, jobID string, version uint64, what string,
	check func(*droverv1.Deployment) bool) *droverv1.Deployment {
	t.Helper()
	var d *droverv1.Deployment
	poll(ctx, t, fmt.Sprintf("deployment of %s version %d %s", jobID, version, what), func() (bool, string) {
		resp, err := dc.deployments.List(ctx, &droverv1.ListDeploymentsRequest{JobId: jobID})
		if err != nil {
			return false, err.Error()
		}
		for _, d = range resp.GetDeployments() {
			if d.GetJobVersion() == version {
				return check(d), fmt.Sprintf("%s %q %v", d.GetStatus(), d.GetStatusDescription(), d.GetGroups())
			}
		}
		return false, fmt.Sprintf("%d deployments, none of that version", len(resp.GetDeployments()))
	})
	return d
}

func (dc deployClients) waitStatus(ctx context.Context, t testing.TB, jobID string, version uint64, st droverv1.DeploymentStatus) *droverv1.Deployment {
	t.Helper()
	return dc.waitDeployment(ctx, t, jobID, version, st.String(), func(d *droverv1.Deployment) bool { return d.GetStatus() == st })
}

// allocCensus is what runs of a job: healthy allocations per version,
// canaries, and the nodes they run on.
type allocCensus struct {
	healthy  map[uint64]int
	running  int
	canaries int
	nodes    map[string]int
}

func (dc deployClients) census(ctx context.Context, t testing.TB, jobID string) allocCensus {
	t.Helper()
	resp, err := dc.jobs.Allocations(ctx, &droverv1.ListJobAllocationsRequest{JobId: jobID})
	if err != nil {
		t.Fatalf("allocations of %s: %v", jobID, err)
	}
	c := allocCensus{healthy: make(map[uint64]int), nodes: make(map[string]int)}
	for _, a := range resp.GetAllocations() {
		if a.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN ||
			a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING {
			continue
		}
		c.running++
		c.nodes[a.GetNodeId()]++
		if a.GetDeploymentStatus().GetCanary() {
			c.canaries++
		}
		// Outside a deployment (a replacement placed after it ended) a
		// running allocation has no health to report.
		if a.GetDeploymentId() == "" || a.GetDeploymentStatus().GetHealthy() {
			c.healthy[a.GetJobVersion()]++
		}
	}
	return c
}

// waitCensus waits until what runs of the job passes check.
func (dc deployClients) waitCensus(ctx context.Context, t testing.TB, jobID, what string, check func(allocCensus) bool) allocCensus {
	t.Helper()
	var c allocCensus
	poll(ctx, t, jobID+": "+what, func() (bool, string) {
		c = dc.census(ctx, t, jobID)
		latest := "none"
		if resp, err := dc.deployments.List(ctx, &droverv1.ListDeploymentsRequest{JobId: jobID}); err == nil && len(resp.GetDeployments()) > 0 {
			d := resp.GetDeployments()[0]
			latest = fmt.Sprintf("version %d %s %v", d.GetJobVersion(), d.GetStatus(), d.GetGroups())
		}
		return check(c), fmt.Sprintf("running %d, healthy per version %v, canaries %d; latest deployment %s", c.running, c.healthy, c.canaries, latest)
	})
	return c
}

// deployCluster starts 3 servers and 6 simulated nodes whose allocations
// turn healthy 300 ms after they start.
func deployCluster(t *testing.T, ctx context.Context, opts ...cluster.Option) (*cluster.Cluster, *simagent.Fleet) {
	c := cluster.New(t, droverBin, 3, opts...)
	c.WaitLeader(ctx)
	waitRecorded(ctx, t, c)
	fleet := startSimFleet(ctx, t, c, 6, simAllocs)
	waitFleetReady(ctx, t, fleet)
	return c, fleet
}

// simAllocs makes simulated agents run allocations and report their
// health 300 ms after they start.
func simAllocs(cfg *simagent.Config) {
	cfg.HeartbeatOnly = false
	cfg.StartDelay = 50 * time.Millisecond
	cfg.HealthDelay = 300 * time.Millisecond
}

// TestDeployments runs deployments on 3 servers with simulated agents:
// canaries promoted by hand and by themselves, a version that turns
// unhealthy reverted, a version that cannot be placed failed by its
// progress deadline, and a job stop cancelling a deployment.
func TestDeployments(t *testing.T) {
	ctx := within(t, t.Context(), 4*time.Minute)
	c, _ := deployCluster(t, ctx)
	dc := newDeployClients(c.WaitLeader(ctx).Conn())

	t.Run("canary then promote", func(t *testing.T) {
		job := rolloutJob("canary")
		dc.register(ctx, t, job)
		dc.waitStatus(ctx, t, job.GetId(), 0, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
		v1 := nextVersion(job)
		v1.TaskGroups[0].Update.Canary = proto.Int32(2)
		dc.register(ctx, t, v1)
		// Both canaries healthy beside the 10 old allocations, and the
		// rollout waits.
		census := dc.waitCensus(ctx, t, job.GetId(), "2 healthy canaries beside 10 old", func(c allocCensus) bool {
			return c.healthy[1] == 2 && c.canaries == 2
		})
		if census.healthy[0] != 10 || census.running != 12 {
			t.Fatalf("while canaries run: %+v, want the 10 old ones untouched", census)
		}
		d := dc.waitStatus(ctx, t, job.GetId(), 1, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING)
		if census = dc.census(ctx, t, job.GetId()); census.healthy[0] != 10 || census.running != 12 {
			t.Fatalf("the rollout went on before promotion: %+v", census)
		}
		if _, err := dc.deployments.Promote(ctx, &droverv1.PromoteDeploymentRequest{DeploymentId: d.GetId()}); err != nil {
			t.Fatalf("promote: %v", err)
		}
		dc.waitStatus(ctx, t, job.GetId(), 1, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
		dc.waitCensus(ctx, t, job.GetId(), "10 healthy of version 1, nothing else", func(c allocCensus) bool {
			return c.healthy[1] == 10 && c.running == 10 && c.canaries == 0
		})

		v2 := nextVersion(v1)
		v2.TaskGroups[0].Update.AutoPromote = proto.Bool(true)
		dc.register(ctx, t, v2)
		d = dc.waitStatus(ctx, t, job.GetId(), 2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
		if g := d.GetGroups()[job.TaskGroups[0].GetName()]; !g.GetPromoted() || g.GetDesiredCanaries() != 2 {
			t.Errorf("auto-promoted deployment group: %v", g)
		}
		dc.waitCensus(ctx, t, job.GetId(), "10 healthy of version 2", func(c allocCensus) bool {
			return c.healthy[2] == 10 && c.running == 10
		})
	})

	t.Run("unhealthy version reverted", func(t *testing.T) {
		job := rolloutJob("revert")
		dc.register(ctx, t, job)
		dc.waitStatus(ctx, t, job.GetId(), 0, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
		bad := nextVersion(job)
		bad.Meta = map[string]string{simagent.UnhealthyMetaKey: "1"}
		bad.TaskGroups[0].Update.AutoRevert = proto.Bool(true)
		bad.TaskGroups[0].Update.ProgressDeadline = durationpb.New(0)
		dc.register(ctx, t, bad)
		failed := dc.waitStatus(ctx, t, job.GetId(), 1, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED)
		if !strings.HasPrefix(failed.GetStatusDescription(), deploy.FailedUnhealthy) {
			t.Errorf("failed deployment says %q", failed.GetStatusDescription())
		}
		dc.waitStatus(ctx, t, job.GetId(), 2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
		dc.waitCensus(ctx, t, job.GetId(), "10 healthy of the reverted version", func(c allocCensus) bool {
			return c.healthy[2] == 10 && c.running == 10
		})
		got, err := dc.jobs.Get(ctx, &droverv1.GetJobRequest{JobId: job.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetJob().GetVersion() != 2 || got.GetJob().GetMeta()[simagent.UnhealthyMetaKey] != "" ||
			got.GetJob().GetTaskGroups()[0].GetResources().GetMemoryMb() != job.TaskGroups[0].GetResources().GetMemoryMb() {
			t.Errorf("after the revert the job is %v, want version 2 with version 0's spec", got.GetJob())
		}
	})

	t.Run("progress deadline", func(t *testing.T) {
		job := rolloutJob("deadline")
		dc.register(ctx, t, job)
		dc.waitStatus(ctx, t, job.GetId(), 0, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
		huge := job.CloneVT()
		huge.TaskGroups[0].Resources.CpuMhz = 1_000_000
		huge.TaskGroups[0].Update.HealthyDeadline = durationpb.New(time.Second)
		huge.TaskGroups[0].Update.ProgressDeadline = durationpb.New(2 * time.Second)
		dc.register(ctx, t, huge)
		failed := dc.waitStatus(ctx, t, job.GetId(), 1, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED)
		if !strings.HasPrefix(failed.GetStatusDescription(), deploy.FailedDeadline) {
			t.Errorf("failed deployment says %q", failed.GetStatusDescription())
		}
		// No node takes the new version, not even where an old allocation
		// leaves room: nothing was stopped.
		if census := dc.census(ctx, t, job.GetId()); census.healthy[0] != 10 || census.running != 10 {
			t.Errorf("after the failed rollout: %+v, want the 10 old allocations running", census)
		}
	})

	t.Run("job stop cancels", func(t *testing.T) {
		job := rolloutJob("stop")
		job.TaskGroups[0].Update.MaxParallel = proto.Int32(1)
		dc.register(ctx, t, job)
		dc.waitStatus(ctx, t, job.GetId(), 0, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
		dc.register(ctx, t, nextVersion(job))
		dc.waitStatus(ctx, t, job.GetId(), 1, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING)
		if _, err := dc.jobs.Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: job.GetId()}); err != nil {
			t.Fatal(err)
		}
		dc.waitStatus(ctx, t, job.GetId(), 1, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_CANCELLED)
		dc.waitCensus(ctx, t, job.GetId(), "nothing running", func(c allocCensus) bool { return c.running == 0 })
	})
	c.CheckCrashes()
}

// TestDeploymentFaults rolls out a new version and, in the middle of it,
// drains a node, takes another away (its agent stops) and kills the
// leader: the next leader finishes the deployment, with every allocation
// of the new version healthy and none on the nodes that left.
func TestDeploymentFaults(t *testing.T) {
	ctx := within(t, t.Context(), 3*time.Minute)
	c, fleet := deployCluster(t, ctx, cluster.Args("-heartbeat-min-ttl", "1s", "-heartbeat-grace", "1s", "-failover-heartbeat-ttl", "3s"))
	lonely := startSimFleet(ctx, t, c, 1, simAllocs)
	waitFleetReady(ctx, t, lonely)
	leader := c.WaitLeader(ctx)
	dc := newDeployClients(c.Others(leader)[0].Conn())

	job := rolloutJob("faults")
	job.TaskGroups[0].Update.MinHealthyTime = durationpb.New(time.Second)
	dc.register(ctx, t, job)
	dc.waitStatus(ctx, t, job.GetId(), 0, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
	before := dc.census(ctx, t, job.GetId())
	// Drain the busiest node of the fleet.
	drained := ""
	for _, a := range fleet.Agents() {
		if id := a.Node().ID; drained == "" || before.nodes[id] > before.nodes[drained] {
			drained = id
		}
	}
	gone := lonely.Agents()[0].Node().ID

	dc.register(ctx, t, nextVersion(job))
	dc.waitDeployment(ctx, t, job.GetId(), 1, "half way", func(d *droverv1.Deployment) bool {
		g := d.GetGroups()[job.TaskGroups[0].GetName()]
		return g.GetHealthyAllocs() >= 2 && g.GetHealthyAllocs() < 10
	})
	if _, err := dc.nodes.UpdateDrain(ctx, &droverv1.UpdateNodeDrainRequest{NodeId: drained, Enable: true}); err != nil {
		t.Fatalf("drain %s: %v", drained, err)
	}
	lonely.Stop()
	leader.Kill()
	t.Logf("mid-rollout: drained %s (%d allocations), stopped the agent of %s (%d), killed leader %s",
		drained, before.nodes[drained], gone, before.nodes[gone], leader)
	c.WaitLeader(ctx, c.Others(leader)...)

	dc.waitStatus(ctx, t, job.GetId(), 1, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
	// The drain and the lost node may finish after the deployment: the
	// job ends with 10 healthy of the new version, none where they were.
	dc.waitCensus(ctx, t, job.GetId(), "10 healthy of version 1, none on the drained node or the lost one", func(c allocCensus) bool {
		return c.healthy[1] == 10 && c.running == 10 && c.nodes[drained] == 0 && c.nodes[gone] == 0
	})
	c.CheckCrashes()
}
