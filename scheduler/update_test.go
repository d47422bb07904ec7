package scheduler

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestTasksUpdated(t *testing.T) {
	base := rcJob(jtService, 2, func(j *droverv1.Job) {
		j.Datacenters = []string{"dc1", "dc2"}
		j.Constraints = []*droverv1.Constraint{
			{Attribute: "kernel.name", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: "linux"},
			{Attribute: "rack", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_SET},
		}
		rcTG(j).Tasks = append(rcTG(j).Tasks, &droverv1.Task{Name: "side", Driver: "exec"})
	})
	cases := []struct {
		name   string
		change func(j *droverv1.Job)
		want   bool
	}{
		{"nothing", func(*droverv1.Job) {}, false},
		{"count", func(j *droverv1.Job) { rcTG(j).Count = 7 }, false},
		{"job meta and priority", func(j *droverv1.Job) { j.Meta = map[string]string{"a": "b"}; j.Priority = 90 }, false},
		{"group meta", func(j *droverv1.Job) { rcTG(j).Meta = map[string]string{"a": "b"} }, false},
		{"reschedule policy", func(j *droverv1.Job) { rcTG(j).ReschedulePolicy.Attempts = 9 }, false},
		{"disconnect settings", func(j *droverv1.Job) {
			rcTG(j).MaxClientDisconnect = durationpb.New(time.Duration(5))
			rcTG(j).ReconnectStrategy = droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_ORIGINAL
		}, false},
		{"datacenters reordered", func(j *droverv1.Job) { j.Datacenters = []string{"dc2", "dc1"} }, false},
		{"job constraints reordered", func(j *droverv1.Job) { j.Constraints[0], j.Constraints[1] = j.Constraints[1], j.Constraints[0] }, false},
		{"tasks reordered", func(j *droverv1.Job) { tg := rcTG(j); tg.Tasks[0], tg.Tasks[1] = tg.Tasks[1], tg.Tasks[0] }, false},
		{"datacenter added", func(j *droverv1.Job) { j.Datacenters = append(j.Datacenters, "dc3") }, true},
		{"job constraint changed", func(j *droverv1.Job) { j.Constraints[0].Value = "darwin" }, true},
		{"group constraint added", func(j *droverv1.Job) {
			rcTG(j).Constraints = []*droverv1.Constraint{{Attribute: "x", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_SET}}
		}, true},
		{"spread added", func(j *droverv1.Job) { rcTG(j).Spreads = []*droverv1.Spread{{Attribute: "rack", Weight: 50}} }, true},
		{"cpu", func(j *droverv1.Job) { rcTG(j).Resources.CpuMhz++ }, true},
		{"port", func(j *droverv1.Job) { rcTG(j).Resources.Ports = []*droverv1.Port{{Label: "http"}} }, true},
		{"driver", func(j *droverv1.Job) { rcTG(j).Tasks[0].Driver = "docker" }, true},
		{"config", func(j *droverv1.Job) { rcTG(j).Tasks[0].Config["command"] = "/bin/x" }, true},
		{"env", func(j *droverv1.Job) { rcTG(j).Tasks[0].Env = map[string]string{"A": "1"} }, true},
		{"task removed", func(j *droverv1.Job) { rcTG(j).Tasks = rcTG(j).Tasks[:1] }, true},
		{"group renamed", func(j *droverv1.Job) { rcTG(j).Name = "other" }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next := rcNextVersion(base, tc.change)
			if got := tasksUpdated(base, next, rcGroup); got != tc.want {
				t.Errorf("tasksUpdated = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAllocUpdate(t *testing.T) {
	v1 := rcJob(jtService, 1)
	v2 := rcNextVersion(v1, withCount(2))
	v3 := rcNextVersion(v2, func(j *droverv1.Job) { rcTG(j).Resources.MemoryMb *= 2 })
	cases := []struct {
		name     string
		alloc    *droverv1.Allocation
		job      *droverv1.Job
		versions func(uint64) *droverv1.Job
		want     allocUpdateKind
	}{
		{"same version", rcAlloc(v2, 0, "n1"), v2, rcVersions(v2), updateNone},
		{"compatible older version", rcAlloc(v1, 0, "n1"), v2, rcVersions(v1, v2), updateInPlace},
		{"incompatible older version", rcAlloc(v2, 0, "n1"), v3, rcVersions(v2, v3), updateDestructive},
		{"older version no longer stored", rcAlloc(v1, 0, "n1"), v2, rcVersions(v2), updateDestructive},
		{"no version lookup", rcAlloc(v1, 0, "n1"), v2, nil, updateDestructive},
	}
	for _, tc := range cases {
		if got := allocUpdate(tc.alloc, tc.job, tc.versions); got != tc.want {
			t.Errorf("%s: allocUpdate = %v, want %v", tc.name, got, tc.want)
		}
	}
}
