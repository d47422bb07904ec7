package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

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
		{"with a progress deadline an unhealthy one is replaced and the rollout goes on", v2, mixed(proto.Bool(false)),
			withDeadline(dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, 0)),
			&droverv1.DesiredUpdates{Stop: 1, Place: 1, DestructiveUpdate: 1, Ignore: 2}, false, 0},
		{"an allocation still stopping for its replacement holds a slot", v2, func() []*droverv1.Allocation {
			allocs := running(v1, "", nil)
			allocs[0] = rcAlloc(v1, 0, "n1", withDesired(dsStop), func(a *droverv1.Allocation) { a.DesiredDescription = allocUpdating })
			return allocs
		}(), dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, 0),
			&droverv1.DesiredUpdates{Place: 1, DestructiveUpdate: 1, Ignore: 2}, false, 0},
		{"an allocation updated in place and not yet healthy holds no slot", v2, func() []*droverv1.Allocation {
			allocs := running(v1, "", nil)
			allocs[0] = rcAlloc(v2, 0, "n1", withID("b0"), withHealth("d", nil), func(a *droverv1.Allocation) { a.CreateIndex = 5 })
			return allocs
		}(), func() *droverv1.Deployment {
			d := dep(v2, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING, 0)
			d.CreateIndex = 10
			return d
		}(), &droverv1.DesiredUpdates{DestructiveUpdate: 2, Ignore: 2}, false, 0},
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

// withDeadline gives every group of d a progress deadline.
func withDeadline(d *droverv1.Deployment) *droverv1.Deployment {
	for _, g := range d.GetGroups() {
		g.ProgressDeadline = durationpb.New(10 * time.Minute)
	}
	return d
}

func TestCanaryAndSurge(t *testing.T) {
	v1 := rcJob(jtService, 4, func(j *droverv1.Job) { rcTG(j).Update.MaxParallel = proto.Int32(2) })
	canary := rcNextVersion(v1, func(j *droverv1.Job) {
		rcTG(j).Resources.MemoryMb = 256
		rcTG(j).Update.Canary = proto.Int32(2)
	})
	surge := rcNextVersion(v1, func(j *droverv1.Job) {
		rcTG(j).Resources.MemoryMb = 256
		rcTG(j).Update.Surge = proto.Bool(true)
	})
	old := func() []*droverv1.Allocation {
		var out []*droverv1.Allocation
		for i := range 4 {
			out = append(out, rcAlloc(v1, i, "n1"))
		}
		return out
	}
	// withNew adds allocations of job's version under the names of the
	// first old ones, in deployment "d", with the given health.
	withNew := func(job *droverv1.Job, canary bool, healthy ...*bool) []*droverv1.Allocation {
		allocs := old()
		for i, h := range healthy {
			allocs = append(allocs, rcAlloc(job, i, "n1", withID(fmt.Sprintf("new%d", i)), func(a *droverv1.Allocation) {
				a.DeploymentId = "d"
				a.DeploymentStatus = &droverv1.AllocDeploymentStatus{Healthy: h, Canary: canary}
			}))
		}
		return allocs
	}
	dep := func(job *droverv1.Job, st droverv1.DeploymentStatus, canaries int32, promoted bool, healthy int32) *droverv1.Deployment {
		return &droverv1.Deployment{Id: "d", JobId: job.GetId(), JobVersion: job.GetVersion(), Status: st,
			Groups: map[string]*droverv1.DeploymentGroup{rcGroup: {DesiredTotal: 4, DesiredCanaries: canaries, Promoted: promoted, HealthyAllocs: healthy}}}
	}
	running := droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING
	yes, no := proto.Bool(true), proto.Bool(false)
	tests := []struct {
		name     string
		job      *droverv1.Job
		allocs   []*droverv1.Allocation
		latest   *droverv1.Deployment
		want     *droverv1.DesiredUpdates
		canaries []string // names placed as canaries
		stopped  []string // ids stopped
		kept     int      // surge replacements placed with their allocation kept
	}{
		{"canaries first, beside the old allocations", canary, old(), nil,
			&droverv1.DesiredUpdates{Canary: 2, Ignore: 4}, []string{"0", "1"}, nil, 0},
		{"placed canaries wait for promotion, healthy or not", canary, withNew(canary, true, nil, yes), dep(canary, running, 2, false, 1),
			&droverv1.DesiredUpdates{Ignore: 6}, nil, nil, 0},
		{"a lost canary is placed again", canary, withNew(canary, true, yes), dep(canary, running, 2, false, 1),
			&droverv1.DesiredUpdates{Canary: 1, Ignore: 5}, []string{"1"}, nil, 0},
		{"promoted: each canary's old allocation stops, the rest rolls", canary, withNew(canary, false, yes, yes), dep(canary, running, 2, true, 2),
			&droverv1.DesiredUpdates{Stop: 2, DestructiveUpdate: 2, Ignore: 2}, nil, []string{"a0", "a1"}, 0},
		{"a canary leaving a draining node is stopped and placed again as a canary", canary, func() []*droverv1.Allocation {
			allocs := withNew(canary, true, yes, yes)
			allocs[len(allocs)-1].DesiredTransition = &droverv1.DesiredTransition{Migrate: true}
			return allocs
		}(), dep(canary, running, 2, false, 2),
			&droverv1.DesiredUpdates{Stop: 1, Canary: 1, Ignore: 5}, []string{"1"}, []string{"new1"}, 0},
		{"canaries of a failed deployment stop", canary, withNew(canary, true, yes, yes),
			dep(canary, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED, 2, false, 2),
			&droverv1.DesiredUpdates{Stop: 2, Ignore: 4}, nil, []string{"new0", "new1"}, 0},
		{"surge: replacements start beside the old allocations", surge, old(), nil,
			&droverv1.DesiredUpdates{DestructiveUpdate: 2, Ignore: 2}, nil, nil, 2},
		{"surge: a pending replacement keeps its old allocation and a slot", surge, withNew(surge, false, nil), dep(surge, running, 0, false, 0),
			&droverv1.DesiredUpdates{DestructiveUpdate: 1, Ignore: 4}, nil, nil, 1},
		{"surge: a healthy replacement stops its old allocation", surge, withNew(surge, false, yes), dep(surge, running, 0, false, 1),
			&droverv1.DesiredUpdates{Stop: 1, DestructiveUpdate: 2, Ignore: 2}, nil, []string{"a0"}, 2},
		{"surge: an unhealthy replacement stops the rollout and keeps the old one", surge, withNew(surge, false, no), dep(surge, running, 0, false, 0),
			&droverv1.DesiredUpdates{Ignore: 5}, nil, nil, 0},
		{"with a progress deadline an unhealthy canary is stopped and placed again", canary, withNew(canary, true, yes, no),
			withDeadline(dep(canary, running, 2, false, 1)),
			&droverv1.DesiredUpdates{Stop: 1, Canary: 1, Ignore: 5}, []string{"1"}, []string{"new1"}, 0},
		{"with a progress deadline an unhealthy surge replacement is stopped and the rollout goes on", surge, withNew(surge, false, no),
			withDeadline(dep(surge, running, 0, false, 0)),
			&droverv1.DesiredUpdates{Stop: 1, DestructiveUpdate: 2, Ignore: 2}, nil, []string{"new0"}, 2},
		{"surge: after a failed rollout the unproven replacement stops", surge, withNew(surge, false, no),
			dep(surge, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED, 0, false, 0),
			&droverv1.DesiredUpdates{Stop: 1, Ignore: 4}, nil, []string{"new0"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := rcRun(t, tt.job, []*droverv1.Job{v1, tt.job}, tt.allocs, rcNodes(rcNode("n1", nsReady)), withDeployments(tt.latest))
			if got := res.desiredUpdates()[rcGroup]; !proto.Equal(got, tt.want) {
				t.Errorf("decided %v, want %v", got, tt.want)
			}
			var canaries []string
			for _, p := range res.place {
				if p.canary {
					idx, _ := allocNameIndex(p.name)
					canaries = append(canaries, fmt.Sprint(idx))
				}
			}
			if !slices.Equal(canaries, tt.canaries) {
				t.Errorf("canaries placed as %v, want %v", canaries, tt.canaries)
			}
			var stopped []string
			for _, s := range res.stop {
				stopped = append(stopped, s.alloc.GetId())
			}
			slices.Sort(stopped)
			if !slices.Equal(stopped, tt.stopped) {
				t.Errorf("stopped %v, want %v", stopped, tt.stopped)
			}
			kept := 0
			for _, d := range res.destructive {
				if d.surge {
					kept++
				}
			}
			if kept != tt.kept {
				t.Errorf("%d surge replacements, want %d", kept, tt.kept)
			}
			if tt.latest == nil && tt.job == canary && res.deployment.GetGroups()[rcGroup].GetDesiredCanaries() != 2 {
				t.Errorf("new deployment %v wants no canaries", res.deployment)
			}
		})
	}
}

func TestRolloutStagger(t *testing.T) {
	v1 := rcJob(jtService, 4, func(j *droverv1.Job) { rcTG(j).Update.MaxParallel = proto.Int32(2) })
	v2 := rcNextVersion(v1, func(j *droverv1.Job) {
		rcTG(j).Resources.MemoryMb = 256
		rcTG(j).Update.Stagger = durationpb.New(time.Minute)
	})
	d := &droverv1.Deployment{Id: "d", JobId: v2.GetId(), JobVersion: v2.GetVersion(), Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING,
		Groups: map[string]*droverv1.DeploymentGroup{rcGroup: {DesiredTotal: 4, HealthyAllocs: 1}}}
	healthyAt := func(at int64) []*droverv1.Allocation {
		allocs := []*droverv1.Allocation{rcAlloc(v2, 0, "n1", withID("b0"), func(a *droverv1.Allocation) {
			a.DeploymentId = "d"
			a.DeploymentStatus = &droverv1.AllocDeploymentStatus{Healthy: proto.Bool(true), Timestamp: at}
		})}
		for i := 1; i < 4; i++ {
			allocs = append(allocs, rcAlloc(v1, i, "n1"))
		}
		return allocs
	}
	tests := []struct {
		name      string
		healthyAt int64
		want      *droverv1.DesiredUpdates
		followup  int64 // wait_until of the follow-up evaluation, 0 for none
	}{
		{"within the stagger: nothing yet, an evaluation when it ends", rcNow - int64(10*time.Second),
			&droverv1.DesiredUpdates{Ignore: 4}, rcNow + int64(50*time.Second)},
		{"the stagger passed: the next batch", rcNow - int64(2*time.Minute),
			&droverv1.DesiredUpdates{DestructiveUpdate: 2, Ignore: 2}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := rcRun(t, v2, []*droverv1.Job{v1}, healthyAt(tt.healthyAt), rcNodes(rcNode("n1", nsReady)), withDeployments(d))
			if got := res.desiredUpdates()[rcGroup]; !proto.Equal(got, tt.want) {
				t.Errorf("decided %v, want %v", got, tt.want)
			}
			var followup int64
			for _, ev := range res.followupEvals {
				if ev.GetTriggeredBy() == droverv1.EvalTrigger_EVAL_TRIGGER_DEPLOYMENT {
					followup = ev.GetWaitUntil()
				}
			}
			if followup != tt.followup {
				t.Errorf("follow-up at %d, want %d", followup, tt.followup)
			}
		})
	}
}

// TestRevertPlacesNoCanaries: rolling back to a stable version's spec
// skips the canaries a new spec would get.
func TestRevertPlacesNoCanaries(t *testing.T) {
	withCanaries := func(j *droverv1.Job) {
		rcTG(j).Update.MaxParallel = proto.Int32(2)
		rcTG(j).Update.Canary = proto.Int32(1)
	}
	v0 := rcJob(jtService, 4, withCanaries)
	v0.Stable = true
	v1 := rcNextVersion(v0, func(j *droverv1.Job) {
		j.Stable = false
		rcTG(j).Resources.MemoryMb = 256
	})
	v2 := rcNextVersion(v1, func(j *droverv1.Job) { rcTG(j).Resources.MemoryMb = rcTG(v0).GetResources().GetMemoryMb() })
	allocs := []*droverv1.Allocation{rcAlloc(v0, 0, "n1"), rcAlloc(v0, 1, "n1"),
		rcAlloc(v1, 2, "n1"), rcAlloc(v1, 3, "n1")}
	for _, tt := range []struct {
		name     string
		older    []*droverv1.Job
		canaries int32
	}{
		{"back to the stable spec", []*droverv1.Job{v0, v1}, 0},
		{"the same spec, never proven", []*droverv1.Job{func() *droverv1.Job { j := v0.CloneVT(); j.Stable = false; return j }(), v1}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := rcRun(t, v2, tt.older, allocs, rcNodes(rcNode("n1", nsReady)), withDeployments(nil))
			if got := res.deployment.GetGroups()[rcGroup].GetDesiredCanaries(); got != tt.canaries {
				t.Errorf("deployment wants %d canaries, want %d", got, tt.canaries)
			}
		})
	}
}
