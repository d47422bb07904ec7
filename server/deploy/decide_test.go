package deploy

import (
	"iter"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

type deployments []*droverv1.Deployment

func (d deployments) Deployments() iter.Seq[*droverv1.Deployment] { return slices.Values(d) }

func deployment(id string, st droverv1.DeploymentStatus, healthy, unhealthy int32, progressBy int64) *droverv1.Deployment {
	return &droverv1.Deployment{Id: id, Status: st, Groups: map[string]*droverv1.DeploymentGroup{"web": {
		DesiredTotal: 4, HealthyAllocs: healthy, UnhealthyAllocs: unhealthy, RequireProgressBy: progressBy}}}
}

func TestWatcherDecide(t *testing.T) {
	const now = 1000
	running := droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING
	w := NewWatcher()
	look := func(ds ...*droverv1.Deployment) (fail map[string]string, progress []string) {
		dec := w.Decide(deployments(ds), now)
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
