package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Ids of the canned nodes.
const (
	nodeID2 = "b2c3d4e5-f6a7-4890-8bcd-ef0123456789"
	nodeID3 = "c3d4e5f6-a7b8-4901-9cde-f01234567890"
)

const (
	eligible   = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE
	ineligible = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
)

func TestPrintNodeList(t *testing.T) {
	nodes := []*droverv1.Node{
		{Id: nodeID2, Name: "web-2", Datacenter: "dc1", NodeClass: "standard", Status: droverv1.NodeStatus_NODE_STATUS_DOWN, SchedulingEligibility: eligible},
		{Id: nodeID3, Name: "web-1", Datacenter: "dc2", Status: droverv1.NodeStatus_NODE_STATUS_DISCONNECTED, SchedulingEligibility: eligible},
		{Id: nodeID1, Name: "web-1", Datacenter: "dc1", NodeClass: "gpu", Status: droverv1.NodeStatus_NODE_STATUS_READY,
			SchedulingEligibility: ineligible, DrainStrategy: &droverv1.DrainStrategy{}},
	}
	tests := []struct {
		name    string
		nodes   []*droverv1.Node
		verbose bool
		want    string
	}{
		{
			name:  "sorted by name, then id",
			nodes: nodes,
			want: `ID        Name   DC   Class     Drain  Eligibility  Status
a1b2c3d4  web-1  dc1  gpu       true   ineligible   ready
c3d4e5f6  web-1  dc2  -         false  eligible     disconnected
b2c3d4e5  web-2  dc1  standard  false  eligible     down
`,
		},
		{
			name:    "verbose",
			nodes:   nodes[:1],
			verbose: true,
			want: `ID                                    Name   DC   Class     Drain  Eligibility  Status
b2c3d4e5-f6a7-4890-8bcd-ef0123456789  web-2  dc1  standard  false  eligible     down
`,
		},
		{name: "none", want: "No nodes registered\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printNodeList(&buf, tt.nodes, tt.verbose); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}

func TestPrintNodeStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	deadline := now.Add(time.Hour).UnixNano()
	node := &droverv1.Node{
		Id: nodeID1, Name: "web-1", Datacenter: "dc1", NodeClass: "standard",
		Attributes: map[string]string{"rack": "r1", "cpu.arch": "amd64"},
		Resources:  &droverv1.NodeResources{CpuMhz: 4000, MemoryMb: 8192, DiskMb: 100000},
		Reserved: &droverv1.NodeReservedResources{CpuMhz: 100, MemoryMb: 256,
			Ports: []*droverv1.PortRange{{First: 22, Last: 22}, {First: 8000, Last: 8100}}},
		Status: droverv1.NodeStatus_NODE_STATUS_READY, StatusDescription: "heartbeat received",
		StatusUpdatedAt: ago(4*time.Minute + 12*time.Second), SchedulingEligibility: ineligible,
		DrainStrategy: &droverv1.DrainStrategy{Deadline: deadline, IgnoreSystemJobs: true, StartedAt: ago(2 * time.Minute)},
		Events: []*droverv1.NodeEvent{
			{Message: "Node registered", Subsystem: "Cluster", Time: ago(time.Hour)},
			{Message: "Node heartbeat missed", Subsystem: "Heartbeat", Time: ago(30 * time.Minute)},
			{Message: "Node reconnected", Time: ago(30 * time.Minute)},
			{Message: "Node drain strategy set", Subsystem: "Drain", Time: ago(2 * time.Minute)},
		},
		AgentVersion: "0.1.0", CreateIndex: 10, ModifyIndex: 52,
	}
	alloc := func(id, job string, client droverv1.AllocClientStatus, index uint64, created, modified time.Duration) *droverv1.Allocation {
		return &droverv1.Allocation{Id: id, NodeId: nodeID1, JobId: job, TaskGroup: "web", JobVersion: 2,
			DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, ClientStatus: client,
			Resources:   &droverv1.AllocatedResources{CpuMhz: 500, MemoryMb: 256, DiskMb: 10},
			CreateIndex: index, CreateTime: ago(created), ModifyTime: ago(modified)}
	}
	allocs := []*droverv1.Allocation{
		alloc("11111111-0000-4000-8000-000000000000", "web", droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, 20, time.Hour, 3*time.Minute),
		alloc("22222222-0000-4000-8000-000000000000", "api", droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING, 30, 5*time.Second, 5*time.Second),
		alloc("33333333-0000-4000-8000-000000000000", "web", droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, 10, 2*time.Hour, time.Hour),
	}
	tests := []struct {
		name string
		view nodeView
		want string
	}{
		{
			name: "draining node",
			view: nodeView{node: node, allocs: allocs, now: now},
			want: `ID                 = ` + nodeID1 + `
Name               = web-1
Datacenter         = dc1
Class              = standard
Status             = ready
Status Description = heartbeat received
Status Since       = 4m12s ago
Eligibility        = ineligible
Drain              = true (started 2m0s ago, deadline ` + formatTime(deadline) + `, system jobs stay)
Resources          = 4000 MHz CPU, 8192 MB memory, 100000 MB disk
Reserved           = 100 MHz CPU, 256 MB memory, 0 MB disk, ports 22,8000-8100
Allocated          = 1000 MHz CPU, 512 MB memory, 20 MB disk
Agent Version      = 0.1.0
Create Index       = 10
Modify Index       = 52

Allocations
ID        Job ID  Task Group  Version  Desired  Status    Created   Modified
22222222  api     web         2        run      pending   5s ago    5s ago
11111111  web     web         2        run      running   1h0m ago  3m0s ago
33333333  web     web         2        run      complete  2h0m ago  1h0m ago

Events
Time                    Subsystem  Message
` + formatTime(ago(2*time.Minute)) + `  Drain      Node drain strategy set
` + formatTime(ago(30*time.Minute)) + `  -          Node reconnected
` + formatTime(ago(30*time.Minute)) + `  Heartbeat  Node heartbeat missed
` + formatTime(ago(time.Hour)) + `  Cluster    Node registered
`,
		},
		{
			name: "new node, verbose",
			view: nodeView{node: &droverv1.Node{Id: nodeID2, Name: "web-2", Datacenter: "dc1", Status: droverv1.NodeStatus_NODE_STATUS_INITIALIZING,
				SchedulingEligibility: eligible, Attributes: map[string]string{"rack": "r1", "cpu.arch": "amd64"},
				Resources: &droverv1.NodeResources{CpuMhz: 1000, MemoryMb: 1024}}, now: now, verbose: true},
			want: `ID                 = ` + nodeID2 + `
Name               = web-2
Datacenter         = dc1
Class              = <none>
Status             = initializing
Status Description = <none>
Status Since       = <none>
Eligibility        = eligible
Drain              = false
Resources          = 1000 MHz CPU, 1024 MB memory, 0 MB disk
Reserved           = 0 MHz CPU, 0 MB memory, 0 MB disk
Allocated          = 0 MHz CPU, 0 MB memory, 0 MB disk
Agent Version      = <none>
Create Index       = 0
Modify Index       = 0

Attributes
cpu.arch = amd64
rack     = r1

Allocations
No allocations placed

Events
No events
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printNodeStatus(&buf, tt.view); err != nil {
				t.Fatal(err)
			}
			if got := alignEventTimes(buf.String()); got != alignEventTimes(tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, alignEventTimes(tt.want))
			}
		})
	}
}

// alignEventTimes squeezes the runs of spaces after an event's time, whose
// width depends on the local zone the times are shown in.
func alignEventTimes(out string) string {
	head, events, ok := strings.Cut(out, "\nEvents\n")
	if !ok {
		return out
	}
	lines := linesOf(events)
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return head + "\nEvents\n" + strings.Join(lines, "\n") + "\n"
}

func TestDrainSummary(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Hour).UnixNano()
	tests := []struct {
		ds   *droverv1.DrainStrategy
		want string
	}{
		{nil, "false"},
		{&droverv1.DrainStrategy{StartedAt: now.Add(-90 * time.Second).UnixNano()}, "true (started 1m30s ago, no deadline)"},
		{&droverv1.DrainStrategy{Deadline: deadline}, "true (started <none>, deadline " + formatTime(deadline) + ")"},
	}
	for _, tt := range tests {
		if got := drainSummary(tt.ds, now); got != tt.want {
			t.Errorf("drainSummary(%v) = %q, want %q", tt.ds, got, tt.want)
		}
	}
}

func TestDrainFlags(t *testing.T) {
	tests := []struct {
		name    string
		flags   drainFlags
		want    *droverv1.UpdateNodeDrainRequest
		wantErr string
	}{
		{"enable: default deadline", drainFlags{enableFlags: enableFlags{enable: true}},
			&droverv1.UpdateNodeDrainRequest{Enable: true, Deadline: durationpb.New(defaultDrainDeadline)}, ""},
		{"enable with deadline and ignore-system", drainFlags{enableFlags: enableFlags{enable: true}, deadline: 10 * time.Minute, ignoreSystem: true},
			&droverv1.UpdateNodeDrainRequest{Enable: true, Deadline: durationpb.New(10 * time.Minute), IgnoreSystemJobs: true}, ""},
		{"enable -no-deadline", drainFlags{enableFlags: enableFlags{enable: true}, noDeadline: true},
			&droverv1.UpdateNodeDrainRequest{Enable: true}, ""},
		{"enable -force", drainFlags{enableFlags: enableFlags{enable: true}, force: true},
			&droverv1.UpdateNodeDrainRequest{Enable: true, Force: true}, ""},
		{"enable -detach", drainFlags{enableFlags: enableFlags{enable: true}, detach: true},
			&droverv1.UpdateNodeDrainRequest{Enable: true, Deadline: durationpb.New(defaultDrainDeadline)}, ""},
		{"disable", drainFlags{enableFlags: enableFlags{disable: true}},
			&droverv1.UpdateNodeDrainRequest{MarkEligible: true}, ""},
		{"disable, keep ineligible", drainFlags{enableFlags: enableFlags{disable: true}, keepIneligible: true},
			&droverv1.UpdateNodeDrainRequest{}, ""},
		{"neither", drainFlags{}, nil, "give exactly one of -enable and -disable"},
		{"both", drainFlags{enableFlags: enableFlags{enable: true, disable: true}}, nil, "give exactly one of -enable and -disable"},
		{"deadline and force", drainFlags{enableFlags: enableFlags{enable: true}, deadline: time.Minute, force: true}, nil,
			"give at most one of -deadline, -no-deadline and -force"},
		{"no-deadline and force", drainFlags{enableFlags: enableFlags{enable: true}, noDeadline: true, force: true}, nil,
			"give at most one of -deadline, -no-deadline and -force"},
		{"deadline with disable", drainFlags{enableFlags: enableFlags{disable: true}, deadline: time.Hour}, nil,
			"-deadline, -no-deadline and -force go with -enable"},
		{"force with disable", drainFlags{enableFlags: enableFlags{disable: true}, force: true}, nil,
			"-deadline, -no-deadline and -force go with -enable"},
		{"ignore-system with disable", drainFlags{enableFlags: enableFlags{disable: true}, ignoreSystem: true}, nil, "-ignore-system goes with -enable"},
		{"keep-ineligible with enable", drainFlags{enableFlags: enableFlags{enable: true}, keepIneligible: true}, nil, "-keep-ineligible goes with -disable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.flags.request()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("request %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPrintDrainSet(t *testing.T) {
	tests := []struct {
		name string
		req  *droverv1.UpdateNodeDrainRequest
		resp *droverv1.UpdateNodeDrainResponse
		want string
	}{
		{"enabled", &droverv1.UpdateNodeDrainRequest{NodeId: nodeID1, Enable: true},
			&droverv1.UpdateNodeDrainResponse{Index: 40, EvalIds: []string{evalID1, evalID2}},
			`Node "` + nodeID1 + `" drain strategy set` + "\nEvaluation ID: " + evalID1 + "\nEvaluation ID: " + evalID2 + "\n"},
		{"already draining", &droverv1.UpdateNodeDrainRequest{NodeId: nodeID1, Enable: true}, &droverv1.UpdateNodeDrainResponse{},
			`Node "` + nodeID1 + `" drain strategy already set` + "\n"},
		{"disabled", &droverv1.UpdateNodeDrainRequest{NodeId: nodeID1, MarkEligible: true}, &droverv1.UpdateNodeDrainResponse{Index: 41},
			`Node "` + nodeID1 + `" drain strategy unset` + "\n" + `Node "` + nodeID1 + `" scheduling eligibility set: eligible for scheduling` + "\n"},
		{"disabled, kept ineligible", &droverv1.UpdateNodeDrainRequest{NodeId: nodeID1}, &droverv1.UpdateNodeDrainResponse{Index: 41},
			`Node "` + nodeID1 + `" drain strategy unset` + "\n"},
		{"not draining", &droverv1.UpdateNodeDrainRequest{NodeId: nodeID1, MarkEligible: true}, &droverv1.UpdateNodeDrainResponse{},
			`Node "` + nodeID1 + `" was not draining; nothing changed` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printDrainSet(&buf, tt.req, tt.resp); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}

func TestPrintEligibilitySet(t *testing.T) {
	tests := []struct {
		e    droverv1.SchedulingEligibility
		resp *droverv1.UpdateNodeEligibilityResponse
		want string
	}{
		{ineligible, &droverv1.UpdateNodeEligibilityResponse{Index: 7},
			`Node "` + nodeID1 + `" scheduling eligibility set: ineligible for scheduling` + "\n"},
		{eligible, &droverv1.UpdateNodeEligibilityResponse{Index: 8, EvalIds: []string{evalID1}},
			`Node "` + nodeID1 + `" scheduling eligibility set: eligible for scheduling` + "\nEvaluation ID: " + evalID1 + "\n"},
		{eligible, &droverv1.UpdateNodeEligibilityResponse{},
			`Node "` + nodeID1 + `" scheduling eligibility already set: eligible for scheduling` + "\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := printEligibilitySet(&buf, nodeID1, tt.e, tt.resp); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tt.want {
			t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
		}
	}
}

func TestDrainCompleted(t *testing.T) {
	complete := func(index uint64) *droverv1.NodeEvent {
		return &droverv1.NodeEvent{Subsystem: droverv1.NodeEventSubsystemDrain, Message: droverv1.NodeEventDrainComplete, CreateIndex: index}
	}
	tests := []struct {
		name   string
		events []*droverv1.NodeEvent
		since  uint64
		want   bool
	}{
		{"completed", []*droverv1.NodeEvent{{Subsystem: "Drain", Message: "Node drain strategy set", CreateIndex: 40}, complete(45)}, 40, true},
		{"completed in the drain's own write", []*droverv1.NodeEvent{complete(40)}, 40, true},
		{"an earlier drain completed", []*droverv1.NodeEvent{complete(12)}, 40, false},
		{"ended by -disable", []*droverv1.NodeEvent{{Subsystem: "Drain", Message: "Node drain strategy unset", CreateIndex: 45}}, 40, false},
		{"no events", nil, 40, false},
	}
	for _, tt := range tests {
		if got := drainCompleted(&droverv1.Node{Events: tt.events}, tt.since); got != tt.want {
			t.Errorf("%s: %t, want %t", tt.name, got, tt.want)
		}
	}
}
