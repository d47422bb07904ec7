package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestParseJob(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    *droverv1.Job
		wantErr string // substring of the error; "" for none
	}{
		{
			name: "proto names",
			file: `{"id": "web", "type": "JOB_TYPE_BATCH", "priority": 70, "datacenters": ["dc1"],
				"task_groups": [{"name": "g", "count": 2, "resources": {"cpu_mhz": 100, "memory_mb": "64"}}]}`,
			want: &droverv1.Job{Id: "web", Type: droverv1.JobType_JOB_TYPE_BATCH, Priority: 70, Datacenters: []string{"dc1"},
				TaskGroups: []*droverv1.TaskGroup{{Name: "g", Count: 2, Resources: &droverv1.Resources{CpuMhz: 100, MemoryMb: 64}}}},
		},
		{
			name: "JSON names",
			file: `{"id": "web", "taskGroups": [{"name": "g", "maxClientDisconnect": "1m", "reschedulePolicy": {"maxDelay": "2s"}}]}`,
			want: &droverv1.Job{Id: "web", TaskGroups: []*droverv1.TaskGroup{{Name: "g", MaxClientDisconnect: durationpb.New(time.Minute),
				ReschedulePolicy: &droverv1.ReschedulePolicy{MaxDelay: durationpb.New(2 * time.Second)}}}},
		},
		{
			name: "human durations",
			file: `{"id": "web", "task_groups": [{"name": "g",
				"max_client_disconnect": "5m", "stop_after_client_disconnect": "1h30m",
				"reschedule_policy": {"interval": "10m", "delay": "300ms", "max_delay": "1m"}}]}`,
			want: &droverv1.Job{Id: "web", TaskGroups: []*droverv1.TaskGroup{{Name: "g",
				MaxClientDisconnect: durationpb.New(5 * time.Minute), StopAfterClientDisconnect: durationpb.New(90 * time.Minute),
				ReschedulePolicy: &droverv1.ReschedulePolicy{Interval: durationpb.New(10 * time.Minute), Delay: durationpb.New(300 * time.Millisecond), MaxDelay: durationpb.New(time.Minute)}}}},
		},
		{
			name: "large integers survive re-encoding",
			file: `{"id": "web", "task_groups": [{"name": "g", "max_client_disconnect": "1s", "resources": {"disk_mb": 9007199254740993}}]}`,
			want: &droverv1.Job{Id: "web", TaskGroups: []*droverv1.TaskGroup{{Name: "g", MaxClientDisconnect: durationpb.New(time.Second),
				Resources: &droverv1.Resources{DiskMb: 9007199254740993}}}},
		},
		{
			name: "second group's durations",
			file: `{"id": "web", "task_groups": [{"name": "a"}, {"name": "b", "reschedule_policy": {"delay": "2s"}}]}`,
			want: &droverv1.Job{Id: "web", TaskGroups: []*droverv1.TaskGroup{{Name: "a"},
				{Name: "b", ReschedulePolicy: &droverv1.ReschedulePolicy{Delay: durationpb.New(2 * time.Second)}}}},
		},
		{
			name: "update block durations as Go durations or protojson seconds",
			file: `{"id": "web", "update": {"max_parallel": 0, "stagger": "1.5s"}, "task_groups": [{"name": "g",
				"update": {"min_healthy_time": "30s", "healthy_deadline": "5m", "progress_deadline": "1h30m", "canary": 1}}]}`,
			want: &droverv1.Job{Id: "web", Update: &droverv1.UpdateStrategy{MaxParallel: proto.Int32(0), Stagger: durationpb.New(1500 * time.Millisecond)},
				TaskGroups: []*droverv1.TaskGroup{{Name: "g", Update: &droverv1.UpdateStrategy{
					MinHealthyTime: durationpb.New(30 * time.Second), HealthyDeadline: durationpb.New(5 * time.Minute),
					ProgressDeadline: durationpb.New(90 * time.Minute), Canary: proto.Int32(1)}}}},
		},
		{
			name:    "invalid update duration",
			file:    `{"id": "web", "task_groups": [{"name": "g", "update": {"healthy_deadline": "later"}}]}`,
			wantErr: `task_groups[0].update.healthy_deadline: invalid duration "later"`,
		},
		{
			name:    "invalid duration",
			file:    `{"id": "web", "task_groups": [{"name": "g", "reschedule_policy": {"delay": "soon"}}]}`,
			wantErr: `task_groups[0].reschedule_policy.delay: invalid duration "soon"`,
		},
		{
			name:    "unknown top-level field",
			file:    `{"id": "web", "datacenter": ["dc1"]}`,
			wantErr: `datacenter: unknown field (did you mean "datacenters"?)`,
		},
		{
			name:    "unknown nested field",
			file:    `{"id": "web", "task_groups": [{"name": "g"}, {"name": "h", "cout": 3}]}`,
			wantErr: `task_groups[1].cout: unknown field (did you mean "count"?)`,
		},
		{
			name:    "unknown field deep down, nothing close",
			file:    `{"id": "web", "task_groups": [{"name": "g", "resources": {"ports": [{"label": "http", "hostNetwork": "x"}]}}]}`,
			wantErr: `task_groups[0].resources.ports[0].hostNetwork: unknown field`,
		},
		{
			name:    "wrong type",
			file:    `{"id": "web", "task_groups": [{"name": "g", "count": "three"}]}`,
			wantErr: `line 1, column 54: invalid value for int32 field count: "three"`,
		},
		{
			name:    "wrong type in a file with durations",
			file:    `{"id": "web", "task_groups": [{"name": "g", "max_client_disconnect": "1s", "count": "three"}]}`,
			wantErr: `invalid value for int32 field count: "three"`,
		},
		{
			// Releases before 0.3 took nanoseconds here.
			name:    "nanoseconds as a number",
			file:    `{"id": "web", "task_groups": [{"name": "g", "max_client_disconnect": 1500}]}`,
			wantErr: `task_groups[0].max_client_disconnect: 1500 is a number: write durations as strings such as "30s"`,
		},
		{
			name:    "nanoseconds as a string of digits",
			file:    `{"id": "web", "task_groups": [{"name": "g", "reschedule_policy": {"delay": "9007199254740993"}}]}`,
			wantErr: `task_groups[0].reschedule_policy.delay: invalid duration "9007199254740993"`,
		},
		{
			name:    "unknown enum value",
			file:    `{"id": "web", "type": "JOB_TYPE_CRON"}`,
			wantErr: `JOB_TYPE_CRON`,
		},
		{
			name:    "invalid JSON",
			file:    "{\n  \"id\": \"web\",\n  \"datacenters\": [\"dc1\",]\n}",
			wantErr: "invalid JSON at line 3, column 25",
		},
		{
			name:    "truncated JSON",
			file:    `{"id": "web"`,
			wantErr: "invalid JSON: unexpected end of file",
		},
		{
			name:    "empty",
			file:    " \n",
			wantErr: "empty",
		},
		{
			name:    "not an object",
			file:    `[{"id": "web"}]`,
			wantErr: "not a JSON object",
		},
		{
			name:    "two objects",
			file:    `{"id": "web"} {"id": "db"}`,
			wantErr: "more than one JSON value",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := parseJob([]byte(tt.file))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(job, tt.want) {
				t.Errorf("job\n%v\nwant\n%v", job, tt.want)
			}
		})
	}
}

func TestReadJobFile(t *testing.T) {
	const file = `{"id": "web", "task_groups": [{"name": "g", "max_client_disconnect": "30s"}]}`
	want := &droverv1.Job{Id: "web", TaskGroups: []*droverv1.TaskGroup{{Name: "g", MaxClientDisconnect: durationpb.New(30 * time.Second)}}}
	path := filepath.Join(t.TempDir(), "web.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"idd": "web"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		stdin   string
		wantErr string
	}{
		{name: "file", path: path},
		{name: "stdin", path: "-", stdin: file},
		{name: "missing file", path: filepath.Join(t.TempDir(), "nope.json"), wantErr: "reading job file: open "},
		{name: "errors name the file", path: bad, wantErr: "job file " + bad + `: idd: unknown field (did you mean "id"?)`},
		{name: "errors name stdin", path: "-", stdin: "{", wantErr: "job file <stdin>: invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := readJobFile(tt.path, strings.NewReader(tt.stdin))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(job, want) {
				t.Errorf("job %v, want %v", job, want)
			}
		})
	}
}

// TestJobsDocExample keeps the example of docs/jobs.md a valid job.
func TestJobsDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/jobs.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/jobs.md has no ```json example")
	}
	job, err := parseJob(m[1])
	if err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
	if got := job.GetTaskGroups()[0].GetMaxClientDisconnect(); got.AsDuration() != 5*time.Minute {
		t.Errorf("max_client_disconnect %s, want 5m", got.AsDuration())
	}
	job.Canonicalize()
	if err := (&droverv1.RegisterJobRequest{Job: job}).Validate(); err != nil {
		t.Errorf("the example is not a valid job: %v", err)
	}
}
