package cli

import (
	"bytes"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Ids of the canned evaluations.
const (
	evalID1    = "3f2a1b4c-9d8e-4f70-a6b5-c4d3e2f10987"
	evalID2    = "5f0d9e8c-1a2b-4c3d-8e9f-a0b1c2d3e4f5"
	evalID3    = "7c6b5a49-3827-4165-9a0b-1c2d3e4f5061"
	blockedID  = "9e8d7c6b-5a49-4382-8716-5a4b3c2d1e0f"
	nodeID1    = "a1b2c3d4-e5f6-4789-9abc-def012345678"
	webFailure = `Task Group "web" (failed to place 2 allocations):
  * No nodes are available in datacenter "dc2"
  * Filter "node.class = gpu" excluded 1 node
  * Resources exhausted on 4 nodes
  * Dimension "cpu" exhausted on 1 node
  * Dimension "memory" exhausted on 3 nodes
`
)

// webPlacementFailure is a failure to place two allocations of group web.
func webPlacementFailure() *droverv1.PlacementFailure {
	return &droverv1.PlacementFailure{
		TaskGroup:      "web",
		Unplaced:       2,
		NodesEvaluated: 5,
		NodesFiltered:  1,
		FilteredBy:     map[string]int32{"node.class = gpu": 1},
		NodesExhausted: 4,
		ExhaustedBy:    map[string]int32{"memory": 3, "cpu": 1},
		NodesAvailable: map[string]int32{"dc1": 5, "dc2": 0},
	}
}

func TestPrintPlacementFailure(t *testing.T) {
	tests := []struct {
		name     string
		pf       *droverv1.PlacementFailure
		indent   string
		detailed bool
		want     string
	}{
		{name: "brief", pf: webPlacementFailure(), want: webFailure},
		{
			name:     "detailed and indented",
			pf:       webPlacementFailure(),
			indent:   "    ",
			detailed: true,
			want: `    Task Group "web" (failed to place 2 allocations):
      * Evaluated 5 nodes: 1 filtered, 4 exhausted
      * No nodes are available in datacenter "dc2"
      * Filter "node.class = gpu" excluded 1 node
      * Resources exhausted on 4 nodes
      * Dimension "cpu" exhausted on 1 node
      * Dimension "memory" exhausted on 3 nodes
`,
		},
		{
			name:     "no nodes at all",
			pf:       &droverv1.PlacementFailure{TaskGroup: "db", Unplaced: 1, NodesAvailable: map[string]int32{"dc1": 0}},
			detailed: true,
			want: `Task Group "db" (failed to place 1 allocation):
  * No nodes were eligible for evaluation
  * No nodes are available in datacenter "dc1"
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			printPlacementFailure(&buf, tt.indent, tt.pf, tt.detailed)
			if buf.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}

func TestPrintEval(t *testing.T) {
	tests := []struct {
		name string
		ev   *droverv1.Evaluation
		want string
	}{
		{
			name: "pending",
			ev: &droverv1.Evaluation{
				Id: evalID1, Priority: 50, Type: droverv1.JobType_JOB_TYPE_SERVICE,
				TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, JobId: "web",
				Status: droverv1.EvalStatus_EVAL_STATUS_PENDING,
			},
			want: `ID                 = ` + evalID1 + `
Create Time        = <none>
Modify Time        = <none>
Status             = pending
Status Description = <none>
Type               = service
Triggered By       = job-register
Job ID             = web
Priority           = 50
Placement Failures = false
Previous Eval      = <none>
Next Eval          = <none>
Blocked Eval       = <none>
`,
		},
		{
			name: "complete with failures, queued and a blocked eval",
			ev: &droverv1.Evaluation{
				Id: evalID1, Priority: 70, Type: droverv1.JobType_JOB_TYPE_BATCH,
				TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE, JobId: "web", NodeId: nodeID1,
				Status: droverv1.EvalStatus_EVAL_STATUS_COMPLETE, StatusDescription: "2 allocations not placed",
				PreviousEval: evalID2, BlockedEval: blockedID,
				PlacementFailures: []*droverv1.PlacementFailure{webPlacementFailure()},
				QueuedAllocations: map[string]int32{"web": 2, "db": 0},
			},
			want: `ID                 = ` + evalID1 + `
Create Time        = <none>
Modify Time        = <none>
Status             = complete
Status Description = 2 allocations not placed
Type               = batch
Triggered By       = node-update
Job ID             = web
Node ID            = ` + nodeID1 + `
Priority           = 70
Placement Failures = true
Previous Eval      = ` + evalID2 + `
Next Eval          = <none>
Blocked Eval       = ` + blockedID + `

Queued Allocations
Task Group  Queued
db          0
web         2

Failed Placements
Task Group "web" (failed to place 2 allocations):
  * Evaluated 5 nodes: 1 filtered, 4 exhausted
  * No nodes are available in datacenter "dc2"
  * Filter "node.class = gpu" excluded 1 node
  * Resources exhausted on 4 nodes
  * Dimension "cpu" exhausted on 1 node
  * Dimension "memory" exhausted on 3 nodes

Evaluation "9e8d7c6b" waiting for additional capacity to place remainder
`,
		},
		{
			name: "blocked",
			ev: &droverv1.Evaluation{
				Id: blockedID, Priority: 50, Type: droverv1.JobType_JOB_TYPE_SERVICE,
				TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_QUEUED_ALLOCS, JobId: "web",
				Status: droverv1.EvalStatus_EVAL_STATUS_BLOCKED, PreviousEval: evalID1,
				ClassEligibility:     map[string]bool{"v1:123": true, "v1:456": false},
				EscapedComputedClass: true,
			},
			want: `ID                 = ` + blockedID + `
Create Time        = <none>
Modify Time        = <none>
Status             = blocked
Status Description = <none>
Type               = service
Triggered By       = queued-allocs
Job ID             = web
Priority           = 50
Placement Failures = false
Previous Eval      = ` + evalID1 + `
Next Eval          = <none>
Blocked Eval       = <none>

Class Eligibility
The job's constraints escape node classes: any capacity change may unblock it.
Class   Eligible
v1:123  true
v1:456  false
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printEval(&buf, tt.ev); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}

func TestPrintEvalList(t *testing.T) {
	evals := []*droverv1.Evaluation{
		{Id: evalID1, Priority: 50, TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, JobId: "web",
			Type: droverv1.JobType_JOB_TYPE_SERVICE, Status: droverv1.EvalStatus_EVAL_STATUS_COMPLETE, CreateIndex: 10,
			PlacementFailures: []*droverv1.PlacementFailure{webPlacementFailure()}},
		{Id: evalID2, Priority: 50, TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER, JobId: "web",
			Type: droverv1.JobType_JOB_TYPE_SERVICE, Status: droverv1.EvalStatus_EVAL_STATUS_PENDING, CreateIndex: 12},
		{Id: evalID3, Priority: 20, TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE, JobId: "batch-1",
			Type: droverv1.JobType_JOB_TYPE_BATCH, Status: droverv1.EvalStatus_EVAL_STATUS_CANCELED, CreateIndex: 11},
	}
	tests := []struct {
		name    string
		evals   []*droverv1.Evaluation
		verbose bool
		want    string
	}{
		{
			name:  "newest first",
			evals: evals,
			want: "" +
				"ID        Priority  Triggered By    Job ID   Type     Status    Placement Failures\n" +
				"5f0d9e8c  50        job-deregister  web      service  pending   false\n" +
				"7c6b5a49  20        node-update     batch-1  batch    canceled  false\n" +
				"3f2a1b4c  50        job-register    web      service  complete  true\n",
		},
		{
			name:    "verbose",
			evals:   evals[:1],
			verbose: true,
			want: "" +
				"ID                                    Priority  Triggered By  Job ID  Type     Status    Placement Failures\n" +
				evalID1 + "  50        job-register  web     service  complete  true\n",
		},
		{name: "none", want: "No evaluations found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printEvalList(&buf, tt.evals, tt.verbose); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}
