package droverv1_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestSpecChanges(t *testing.T) {
	base := mock.Job(2)
	base.TaskGroups[0].Name = "web"
	base.TaskGroups[0].Tasks[0].Name = "server"
	second := base.TaskGroups[0].CloneVT()
	second.Name = "db"
	base.TaskGroups = append(base.TaskGroups, second)
	tests := []struct {
		name string
		edit func(j *droverv1.Job)
		want []*droverv1.FieldChange
	}{
		{"nothing", func(*droverv1.Job) {}, nil},
		{"server-owned fields only", func(j *droverv1.Job) { j.Version, j.ModifyIndex, j.Stable, j.SubmitTime = 9, 99, true, 5 }, nil},
		{"groups reordered", func(j *droverv1.Job) { j.TaskGroups[0], j.TaskGroups[1] = j.TaskGroups[1], j.TaskGroups[0] }, nil},
		{"a count", func(j *droverv1.Job) { j.TaskGroups[1].Count = 5 },
			[]*droverv1.FieldChange{{Path: "task_groups[db].count", Old: "2", New: "5"}}},
		{"a task's driver, by names", func(j *droverv1.Job) { j.TaskGroups[0].Tasks[0].Driver = "docker" },
			[]*droverv1.FieldChange{{Path: "task_groups[web].tasks[server].driver", Old: `"` + base.TaskGroups[0].Tasks[0].GetDriver() + `"`, New: `"docker"`}}},
		{"meta added and removed", func(j *droverv1.Job) { j.Meta = map[string]string{"owner": "ops"} },
			[]*droverv1.FieldChange{{Path: "meta[owner]", New: `"ops"`}}},
		{"a list as one value", func(j *droverv1.Job) { j.Datacenters = append(j.Datacenters, "dc9") },
			[]*droverv1.FieldChange{{Path: "datacenters", Old: `["dc1"]`, New: `["dc1", "dc9"]`}}},
		{"an enum", func(j *droverv1.Job) { j.Type = droverv1.JobType_JOB_TYPE_BATCH },
			[]*droverv1.FieldChange{{Path: "type", Old: "JOB_TYPE_SERVICE", New: "JOB_TYPE_BATCH"}}},
		{"update block fields, durations whole", func(j *droverv1.Job) {
			j.Update = &droverv1.UpdateStrategy{MaxParallel: proto.Int32(0), HealthyDeadline: durationpb.New(90 * time.Second)}
		}, []*droverv1.FieldChange{{Path: "update.max_parallel", New: "0"}, {Path: "update.healthy_deadline", New: `"90s"`}}},
		{"a group removed", func(j *droverv1.Job) { j.TaskGroups = j.TaskGroups[:1] },
			[]*droverv1.FieldChange{{Path: "task_groups[db]", Old: "<db>"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base.CloneVT()
			tt.edit(changed)
			got := droverv1.SpecChanges(base, changed)
			if len(got) != len(tt.want) {
				t.Fatalf("changes %v, want %v", got, tt.want)
			}
			for i, c := range got {
				w := tt.want[i]
				if w.GetOld() == "<db>" {
					// A whole group: its JSON, checked only for naming it.
					if c.GetPath() != w.GetPath() || c.GetNew() != "" || !strings.Contains(c.GetOld(), `"name":"db"`) {
						t.Errorf("change %d = %v, want %s removed", i, c, w.GetPath())
					}
					continue
				}
				if !proto.Equal(c, w) {
					t.Errorf("change %d = %v, want %v", i, c, w)
				}
			}
		})
	}
}
