package scheduler

import (
	"testing"

	"google.golang.org/protobuf/proto"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// withDeployments turns rollouts on, with d as the job's latest
// deployment (nil: none yet).
func withDeployments(d *droverv1.Deployment) func(*reconcileInput) {
	return func(in *reconcileInput) {
		in.deployments, in.deployment = true, d
		in.newDeploymentID = func() string { return "new-deployment" }
	}
}

func withHealth(deploymentID string, healthy *bool) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) {
		a.DeploymentId = deploymentID
		a.DeploymentStatus = &droverv1.AllocDeploymentStatus{Healthy: healthy}
	}
}

func TestRollout(t *testing.T) {
	v1 := rcJob(jtService, 4, func(j *droverv1.Job) { rcTG(j).Update.MaxParallel = proto.Int32(2) })
	v2 := rcNextVersion(v1, func(j *droverv1.Job) { rcTG(j).Resources.MemoryMb = 256 })
	running := func(job *droverv1.Job, deployment string, healthy *bool) []*droverv1.Allocation {
		var out []*droverv1.Allocation
		for i := range 4 {
			out = append(out, rcAlloc(job, i, "n1", withHealth(deployment, healthy)))
		}
		return out
	}
	dep := func(job *droverv1.Job, st droverv1.DeploymentStatus, healthy int32) *droverv1.Deployment {
		return &droverv1.Deployment{Id: "d", JobId: job.GetId(), JobVersion: job.GetVersion(), Status: st,
			Groups: map[string]*droverv1.DeploymentGroup{rcGroup: {DesiredTotal: 4, HealthyAllocs: healthy}}}
	}
	mixed := func(healthy *bool) []*droverv1.Allocation {
		allocs := running(v1, "", nil)
		allocs[0] = rcAlloc(v2, 0, "n1", withID("b0"), withHealth("d", healthy))
		return allocs
	}
	tests := []struct {
		name       string
		job        *droverv1.Job
		allocs     []*droverv1.Allocation
		latest     *droverv1.Deployment
		want       *droverv1.DesiredUpdates
		created    bool
		statusWant droverv1.DeploymentStatus // of an update to the latest, if any
	}{
		{"a new version starts a deployment, max_parallel at once", v2, running(v1, "", nil), nil,
			&droverv1.DesiredUpdates{DestructiveUpdate: 2, Ignore: 2}, true, 0},
		{"a new allocation not yet healthy holds one slot", v2, mixed(nil), dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, 0),
			&droverv1.DesiredUpdates{DestructiveUpdate: 1, Ignore: 3}, false, 0},
		{"a healthy one frees it", v2, mixed(proto.Bool(true)), dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, 1),
			&droverv1.DesiredUpdates{DestructiveUpdate: 2, Ignore: 2}, false, 0},
		{"an unhealthy one stops the rollout", v2, mixed(proto.Bool(false)), dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, 0),
			&droverv1.DesiredUpdates{Ignore: 4}, false, 0},
		{"a paused deployment replaces nothing", v2, mixed(proto.Bool(true)), dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_PAUSED, 1),
			&droverv1.DesiredUpdates{Ignore: 4}, false, 0},
		{"every allocation healthy: successful", v2, running(v2, "d", proto.Bool(true)), dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, 4),
			&droverv1.DesiredUpdates{Ignore: 4}, false, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL},
		{"a newer version cancels the running deployment", rcNextVersion(v2, func(j *droverv1.Job) { rcTG(j).Resources.MemoryMb = 512 }),
			running(v2, "d", proto.Bool(true))[:4], dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, 0),
			&droverv1.DesiredUpdates{DestructiveUpdate: 2, Ignore: 2}, true, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_CANCELLED},
		{"max_parallel 0: everything at once, no deployment", rcNextVersion(v1, func(j *droverv1.Job) {
			rcTG(j).Resources.MemoryMb = 256
			rcTG(j).Update.MaxParallel = proto.Int32(0)
		}), running(v1, "", nil), nil, &droverv1.DesiredUpdates{DestructiveUpdate: 4}, false, 0},
		{"a group already on its version starts none", rcNextVersion(v1, func(j *droverv1.Job) { rcTG(j).Count = 5 }),
			running(rcNextVersion(v1, func(j *droverv1.Job) { rcTG(j).Count = 5 }), "", nil), nil,
			&droverv1.DesiredUpdates{Place: 1, Ignore: 4}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := rcRun(t, tt.job, []*droverv1.Job{v1, v2}, tt.allocs, rcNodes(rcNode("n1", nsReady)), withDeployments(tt.latest))
			got := res.desiredUpdates()[rcGroup]
			if !proto.Equal(got, tt.want) {
				t.Errorf("decided %v, want %v", got, tt.want)
			}
			if (res.deployment != nil) != tt.created {
				t.Errorf("created deployment %v, want created %v", res.deployment, tt.created)
			}
			var status droverv1.DeploymentStatus
			for _, u := range res.deploymentUpdates {
				status = u.GetStatus()
			}
			if status != tt.statusWant {
				t.Errorf("deployment updates %v, want status %s", res.deploymentUpdates, tt.statusWant)
			}
			if res.deployment != nil {
				for _, d := range res.destructive {
					if d.place.deploymentID != res.deployment.GetId() {
						t.Errorf("replacement %s joins deployment %q, want the new one", d.place.name, d.place.deploymentID)
					}
				}
			}
		})
	}
}
