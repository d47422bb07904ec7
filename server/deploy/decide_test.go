package deploy

import (
	"iter"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// fakeState holds deployments and the allocations of their canaries.
type fakeState struct {
	deployments []*droverv1.Deployment
	allocs      map[string]*droverv1.Allocation
}

func (f fakeState) Deployments() iter.Seq[*droverv1.Deployment] { return slices.Values(f.deployments) }
func (f fakeState) AllocByID(id string) *droverv1.Allocation    { return f.allocs[id] }

func deployment(id string, st droverv1.DeploymentStatus, healthy, unhealthy int32, progressBy int64) *droverv1.Deployment {
	return &droverv1.Deployment{Id: id, Status: st, Groups: map[string]*droverv1.DeploymentGroup{"web": {
		DesiredTotal: 4, HealthyAllocs: healthy, UnhealthyAllocs: unhealthy, RequireProgressBy: progressBy}}}
}

func TestWatcherDecide(t *testing.T) {
	const now = 1000
	running := droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING
	w := NewWatcher()
	look := func(ds ...*droverv1.Deployment) (fail map[string]string, progress []string) {
		dec := w.Decide(fakeState{deployments: ds}, now)
		fail = make(map[string]string)
		for _, f := range dec.Fail {
			fail[f.Deployment.GetId()] = f.Description
		}
		for _, d := range dec.Progress {
			progress = append(progress, d.GetId())
		}
		return fail, progress
	}
	steps := []struct {
		name     string
		ds       []*droverv1.Deployment
		fail     map[string]string
		progress []string
	}{
		{"first look: every running deployment gets an evaluation", []*droverv1.Deployment{
			deployment("a", running, 1, 0, 2000), deployment("p", droverv1.DeploymentStatus_DEPLOYMENT_STATUS_PAUSED, 0, 0, 10)},
			map[string]string{}, []string{"a"}},
		{"nothing changed", []*droverv1.Deployment{deployment("a", running, 1, 0, 2000)}, map[string]string{}, nil},
		{"a healthy allocation", []*droverv1.Deployment{deployment("a", running, 2, 0, 2000)}, map[string]string{}, []string{"a"}},
		{"an unhealthy allocation", []*droverv1.Deployment{deployment("a", running, 2, 1, 2000)}, map[string]string{"a": FailedUnhealthy}, nil},
		{"unhealthy with a progress deadline: the scheduler replaces it", []*droverv1.Deployment{func() *droverv1.Deployment {
			d := deployment("e", running, 1, 1, 2000)
			d.Groups["web"].ProgressDeadline = durationpb.New(time.Duration(500))
			return d
		}()}, map[string]string{}, []string{"e"}},
		{"the progress deadline passed", []*droverv1.Deployment{deployment("b", running, 3, 0, now-1)}, map[string]string{"b": FailedDeadline}, nil},
		{"past the deadline but done", []*droverv1.Deployment{deployment("c", running, 4, 0, now-1)}, map[string]string{}, []string{"c"}},
	}
	for _, st := range steps {
		fail, progress := look(st.ds...)
		if len(fail) != len(st.fail) || !slices.Equal(progress, st.progress) {
			t.Fatalf("%s: fail %v, progress %v; want %v, %v", st.name, fail, progress, st.fail, st.progress)
		}
		for id, why := range st.fail {
			if fail[id] != why {
				t.Errorf("%s: %s fails %q, want %q", st.name, id, fail[id], why)
			}
		}
	}
}

func TestWatcherPromotes(t *testing.T) {
	const now = 1000
	canary := func(id string, healthy *bool) *droverv1.Allocation {
		return &droverv1.Allocation{Id: id, DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN,
			DeploymentStatus: &droverv1.AllocDeploymentStatus{Canary: true, Healthy: healthy}}
	}
	yes := func() *bool { b := true; return &b }()
	allocs := map[string]*droverv1.Allocation{"c1": canary("c1", yes), "c2": canary("c2", yes), "c3": canary("c3", nil)}
	dep := func(auto, promoted bool, canaries ...string) *droverv1.Deployment {
		return &droverv1.Deployment{Id: "d", Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING,
			Groups: map[string]*droverv1.DeploymentGroup{"web": {DesiredTotal: 4, DesiredCanaries: 2, AutoPromote: auto,
				Promoted: promoted, PlacedCanaries: canaries, HealthyAllocs: 2, RequireProgressBy: now - 1}}}
	}
	tests := []struct {
		name          string
		d             *droverv1.Deployment
		promote, fail bool
	}{
		{"every canary healthy, auto_promote", dep(true, false, "c1", "c2"), true, false},
		{"a canary not healthy yet: the deadline applies", dep(true, false, "c1", "c3"), false, true},
		{"fewer canaries than wanted", dep(true, false, "c1"), false, true},
		{"no auto_promote: waits for the operator past the deadline", dep(false, false, "c1", "c2"), false, false},
		{"promoted already: the deadline applies", dep(true, true, "c1", "c2"), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := NewWatcher().Decide(fakeState{deployments: []*droverv1.Deployment{tt.d}, allocs: allocs}, now)
			if got := len(dec.Promote) == 1; got != tt.promote {
				t.Errorf("promote %v, want %v", got, tt.promote)
			}
			if got := len(dec.Fail) == 1; got != tt.fail {
				t.Errorf("fail %v, want %v", dec.Fail, tt.fail)
			}
		})
	}
}
