package cli

import (
	"bytes"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestPrintJobStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	job := &droverv1.Job{
		Id: "web", Name: "web frontend", Type: droverv1.JobType_JOB_TYPE_SERVICE, Priority: 60,
		Datacenters: []string{"dc1", "dc2"}, Status: droverv1.JobStatus_JOB_STATUS_RUNNING, Version: 2, Stable: true, JobModifyIndex: 17,
		TaskGroups: []*droverv1.TaskGroup{{Name: "web", Count: 3}, {Name: "db", Count: 1}},
	}
	alloc := func(id, group string, version uint64, desired droverv1.AllocDesiredStatus, client droverv1.AllocClientStatus, index uint64, created time.Duration) *droverv1.Allocation {
		return &droverv1.Allocation{Id: id, NodeId: nodeID1, TaskGroup: group, JobVersion: version,
			DesiredStatus: desired, ClientStatus: client, CreateIndex: index, CreateTime: ago(created)}
	}
	const (
		run  = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
		stop = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP
	)
	allocs := []*droverv1.Allocation{
		alloc("11111111-0000-4000-8000-000000000000", "web", 2, run, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, 20, 3*time.Minute),
		alloc("22222222-0000-4000-8000-000000000000", "web", 2, run, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING, 30, 5*time.Second),
		alloc("33333333-0000-4000-8000-000000000000", "web", 1, stop, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, 10, 2*time.Hour),
		alloc("44444444-0000-4000-8000-000000000000", "cache", 1, stop, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST, 9, 2*time.Hour),
		alloc("55555555-0000-4000-8000-000000000000", "db", 2, run, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN, 21, 3*time.Minute),
	}
	evals := []*droverv1.Evaluation{
		{Id: evalID2, TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, Status: droverv1.EvalStatus_EVAL_STATUS_COMPLETE, CreateIndex: 8, CreateTime: ago(2 * time.Hour)},
		{Id: evalID1, TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, Status: droverv1.EvalStatus_EVAL_STATUS_COMPLETE, CreateIndex: 19, CreateTime: ago(3 * time.Minute),
			PlacementFailures: []*droverv1.PlacementFailure{webPlacementFailure()}, BlockedEval: blockedID},
		{Id: blockedID, TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_QUEUED_ALLOCS, Status: droverv1.EvalStatus_EVAL_STATUS_BLOCKED, CreateIndex: 19, CreateTime: ago(3 * time.Minute)},
	}
	tests := []struct {
		name string
		view jobView
		want string
	}{
		{
			name: "running job",
			view: jobView{job: job, allocs: allocs, evals: evals, now: now},
			want: `ID               = web
Name             = web frontend
Submit Date      = <none>
Type             = service
Priority         = 60
Datacenters      = dc1,dc2
Status           = running
Version          = 2
Stable           = true
Job Modify Index = 17
Stop             = false

Summary
Task Group  Desired  Pending  Running  Complete  Failed  Lost  Unknown
web         3        1        1        1         0       0     0
db          1        0        0        0         0       0     1
cache       -        0        0        0         0       1     0

Latest Evaluations
ID        Triggered By   Status    Created   Placement Failures
3f2a1b4c  job-register   complete  3m0s ago  web: 2 unplaced
9e8d7c6b  queued-allocs  blocked   3m0s ago  -
5f0d9e8c  job-register   complete  2h0m ago  -

Placement Failure
` + webFailure + `Evaluation "9e8d7c6b" waiting for additional capacity to place remainder

Allocations
ID        Node ID   Task Group  Version  Desired  Status    Created
22222222  a1b2c3d4  web         2        run      pending   5s ago
55555555  a1b2c3d4  db          2        run      unknown   3m0s ago
11111111  a1b2c3d4  web         2        run      running   3m0s ago
33333333  a1b2c3d4  web         1        stop     complete  2h0m ago
44444444  a1b2c3d4  cache       1        stop     lost      2h0m ago
`,
		},
		{
			name: "stopped job, nothing placed, full ids",
			view: jobView{
				job: &droverv1.Job{Id: "batch-1", Name: "batch-1", Type: droverv1.JobType_JOB_TYPE_BATCH, Priority: 50,
					Datacenters: []string{"dc1"}, Status: droverv1.JobStatus_JOB_STATUS_DEAD, Stop: true,
					TaskGroups: []*droverv1.TaskGroup{{Name: "work", Count: 2}}},
				evals: []*droverv1.Evaluation{{Id: evalID3, TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER,
					Status: droverv1.EvalStatus_EVAL_STATUS_PENDING, CreateTime: ago(time.Second)}},
				now:     now,
				verbose: true,
			},
			want: `ID               = batch-1
Name             = batch-1
Submit Date      = <none>
Type             = batch
Priority         = 50
Datacenters      = dc1
Status           = dead (stopped)
Version          = 0
Stable           = false
Job Modify Index = 0
Stop             = true

Summary
Task Group  Desired  Pending  Running  Complete  Failed  Lost  Unknown
work        2        0        0        0         0       0     0

Latest Evaluations
ID                                    Triggered By    Status   Created  Placement Failures
` + evalID3 + `  job-deregister  pending  1s ago   -

Allocations
No allocations placed
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printJobStatus(&buf, tt.view); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}

func TestPlacementToReport(t *testing.T) {
	failed := func(id string) *droverv1.Evaluation {
		return &droverv1.Evaluation{Id: id, Status: droverv1.EvalStatus_EVAL_STATUS_COMPLETE,
			PlacementFailures: []*droverv1.PlacementFailure{webPlacementFailure()}}
	}
	placed := &droverv1.Evaluation{Id: evalID3, Status: droverv1.EvalStatus_EVAL_STATUS_COMPLETE}
	blocked := &droverv1.Evaluation{Id: blockedID, Status: droverv1.EvalStatus_EVAL_STATUS_BLOCKED}
	tests := []struct {
		name  string
		evals []*droverv1.Evaluation // newest first
		want  string
	}{
		{"no evaluations", nil, ""},
		{"failures, nothing blocked", []*droverv1.Evaluation{failed(evalID1)}, ""},
		{"failures and a blocked evaluation", []*droverv1.Evaluation{blocked, placed, failed(evalID1), failed(evalID2)}, evalID1},
		{"blocked, no failures", []*droverv1.Evaluation{blocked, placed}, ""},
	}
	for _, tt := range tests {
		if got := placementToReport(tt.evals); got.GetId() != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got.GetId(), tt.want)
		}
	}
}

func TestLatestEvalsAreBounded(t *testing.T) {
	var evals []*droverv1.Evaluation
	for i := range latestEvals + 3 {
		evals = append(evals, &droverv1.Evaluation{Id: evalID1, CreateIndex: uint64(i)})
	}
	var buf bytes.Buffer
	if err := (jobView{}).printLatestEvals(&buf, evals); err != nil {
		t.Fatal(err)
	}
	// A heading, a table header and one line per evaluation shown.
	if got := bytes.Count(buf.Bytes(), []byte("\n")); got != 3+latestEvals {
		t.Errorf("%d lines, want %d:\n%s", got, 3+latestEvals, buf.String())
	}
}
