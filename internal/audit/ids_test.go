package audit

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// bigJob is a job with many groups and tasks, none of which holds an id.
func bigJob(id string) *droverv1.Job {
	job := &droverv1.Job{Id: id, Name: id, Datacenters: []string{"dc1"}, Meta: map[string]string{"owner": "team"}}
	for g := range 50 {
		tg := &droverv1.TaskGroup{Name: fmt.Sprintf("g%d", g), Count: 3}
		for k := range 10 {
			tg.Tasks = append(tg.Tasks, &droverv1.Task{
				Name:   fmt.Sprintf("t%d", k),
				Driver: "exec",
				Config: map[string]string{"command": "/bin/sleep", "args": "1000"},
				Env:    map[string]string{"SERVICE_ID": "not-a-field", "API_TOKEN": "env values are not fields"},
			})
		}
		job.TaskGroups = append(job.TaskGroups, tg)
	}
	return job
}

// bigPlan is a plan of nodes × allocs per node, every allocation naming four
// ids, and an eval token that must not show.
func bigPlan(nodes, allocs int) *droverv1.SubmitPlanRequest {
	plan := &droverv1.Plan{EvalId: "e1", EvalToken: "tok-secret", JobId: "web"}
	for n := range nodes {
		np := &droverv1.NodePlan{NodeId: fmt.Sprintf("n%d", n)}
		for a := range allocs {
			np.Allocations = append(np.Allocations, &droverv1.Allocation{
				Id:     fmt.Sprintf("a%d-%d", n, a),
				EvalId: "e1",
				NodeId: fmt.Sprintf("n%d", n),
				JobId:  "web",
			})
		}
		np.Stops = []*droverv1.AllocStop{{AllocId: fmt.Sprintf("old%d", n)}}
		plan.NodePlans = append(plan.NodePlans, np)
	}
	return &droverv1.SubmitPlanRequest{Plan: plan}
}

func TestRequestIDs(t *testing.T) {
	var allocs []*droverv1.AllocClientUpdate
	wantAllocs := map[string]string{"node_id": "n1"}
	for i := range 20 {
		allocs = append(allocs, &droverv1.AllocClientUpdate{AllocId: fmt.Sprintf("a%d", i)})
		if i < 16 {
			wantAllocs[fmt.Sprintf("allocs.%d.alloc_id", i)] = fmt.Sprintf("a%d", i)
		}
	}

	for _, tc := range []struct {
		name string
		msg  proto.Message
		want map[string]string
	}{
		{"nil", nil, nil},
		{"typed nil", (*droverv1.RegisterJobRequest)(nil), nil},
		{"no ids", &droverv1.DeregisterJobRequest{}, nil},
		{
			"register job: nested id, spec without ids",
			&droverv1.RegisterJobRequest{Job: bigJob("web"), RequestId: "r1"},
			map[string]string{"job.id": "web", "request_id": "r1"},
		},
		{
			"deregister job",
			&droverv1.DeregisterJobRequest{JobId: "web", RequestId: "r2"},
			map[string]string{"job_id": "web", "request_id": "r2"},
		},
		{
			"node drain",
			&droverv1.UpdateNodeDrainRequest{NodeId: "n1", Enable: true, Deadline: durationpb.New(time.Duration(5))},
			map[string]string{"node_id": "n1"},
		},
		{
			"promote deployment",
			&droverv1.PromoteDeploymentRequest{DeploymentId: "d1", Groups: []string{"web"}},
			map[string]string{"deployment_id": "d1"},
		},
		{
			"heartbeat: secret_id left out",
			&droverv1.UpdateNodeStatusRequest{NodeId: "n1", SecretId: "s3cr3t", Status: droverv1.NodeStatus_NODE_STATUS_READY},
			map[string]string{"node_id": "n1"},
		},
		{
			"register node: nested secret_id left out",
			&droverv1.RegisterNodeRequest{Node: &droverv1.Node{Id: "n1", SecretId: "s3cr3t", Attributes: map[string]string{"rack_id": "r1"}}},
			map[string]string{"node.id": "n1"},
		},
		{
			"eval token left out",
			&droverv1.EvalTokenRequest{EvalId: "e1", Token: "t0k"},
			map[string]string{"eval_id": "e1"},
		},
		{
			"alloc updates: first 16 elements only",
			&droverv1.UpdateAllocRequest{NodeId: "n1", SecretId: "s3cr3t", Allocs: allocs},
			wantAllocs,
		},
		{
			"plan: nested repeated messages",
			bigPlan(2, 1),
			map[string]string{
				"plan.eval_id":                            "e1",
				"plan.job_id":                             "web",
				"plan.node_plans.0.node_id":               "n0",
				"plan.node_plans.0.allocations.0.id":      "a0-0",
				"plan.node_plans.0.allocations.0.eval_id": "e1",
				"plan.node_plans.0.allocations.0.node_id": "n0",
				"plan.node_plans.0.allocations.0.job_id":  "web",
				"plan.node_plans.0.stops.0.alloc_id":      "old0",
				"plan.node_plans.1.node_id":               "n1",
				"plan.node_plans.1.allocations.0.id":      "a1-0",
				"plan.node_plans.1.allocations.0.eval_id": "e1",
				"plan.node_plans.1.allocations.0.node_id": "n1",
				"plan.node_plans.1.allocations.0.job_id":  "web",
				"plan.node_plans.1.stops.0.alloc_id":      "old1",
			},
		},
		{
			"plan: capped at 64 in field order",
			bigPlan(16, 16),
			planPrefix(64),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RequestIDs(tc.msg)
			if !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("RequestIDs =\n%s\nwant\n%s", show(got), show(tc.want))
			}
		})
	}
}

// planPrefix returns the first n ids of bigPlan(16, 16) in walk order: the
// plan's own ids, then node plan 0's node id and its allocations' ids.
func planPrefix(n int) map[string]string {
	type kv struct{ k, v string }
	all := []kv{{"plan.eval_id", "e1"}, {"plan.job_id", "web"}, {"plan.node_plans.0.node_id", "n0"}}
	for a := range 16 {
		p := fmt.Sprintf("plan.node_plans.0.allocations.%d.", a)
		all = append(all,
			kv{p + "id", fmt.Sprintf("a0-%d", a)}, kv{p + "eval_id", "e1"},
			kv{p + "node_id", "n0"}, kv{p + "job_id", "web"})
	}
	m := make(map[string]string)
	for _, e := range all[:n] {
		m[e.k] = e.v
	}
	return m
}

func show(m map[string]string) string {
	if m == nil {
		return "  (nil)"
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "  %s=%s\n", k, m[k])
	}
	return b.String()
}

// treeFile describes a recursive message with maps, which no drover request
// has yet: string-keyed and int-keyed maps of messages, a map and a list of
// id strings, and fields that must be skipped.
const treeFile = `
name: "audit_tree.proto" package: "audittest" syntax: "proto3"
message_type {
  name: "Tree"
  field { name: "id" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
  field { name: "children" number: 2 type: TYPE_MESSAGE label: LABEL_REPEATED type_name: ".audittest.Tree.ChildrenEntry" }
  field { name: "by_rank" number: 3 type: TYPE_MESSAGE label: LABEL_REPEATED type_name: ".audittest.Tree.ByRankEntry" }
  field { name: "peer_id" number: 4 type: TYPE_STRING label: LABEL_REPEATED }
  field { name: "owner_id" number: 5 type: TYPE_MESSAGE label: LABEL_REPEATED type_name: ".audittest.Tree.OwnerIdEntry" }
  field { name: "labels" number: 6 type: TYPE_MESSAGE label: LABEL_REPEATED type_name: ".audittest.Tree.LabelsEntry" }
  field { name: "api_token_id" number: 7 type: TYPE_STRING label: LABEL_OPTIONAL }
  field { name: "secret" number: 8 type: TYPE_MESSAGE label: LABEL_OPTIONAL type_name: ".audittest.Tree" }
  nested_type {
    name: "ChildrenEntry" options { map_entry: true }
    field { name: "key" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
    field { name: "value" number: 2 type: TYPE_MESSAGE label: LABEL_OPTIONAL type_name: ".audittest.Tree" }
  }
  nested_type {
    name: "ByRankEntry" options { map_entry: true }
    field { name: "key" number: 1 type: TYPE_INT32 label: LABEL_OPTIONAL }
    field { name: "value" number: 2 type: TYPE_MESSAGE label: LABEL_OPTIONAL type_name: ".audittest.Tree" }
  }
  nested_type {
    name: "OwnerIdEntry" options { map_entry: true }
    field { name: "key" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
    field { name: "value" number: 2 type: TYPE_STRING label: LABEL_OPTIONAL }
  }
  nested_type {
    name: "LabelsEntry" options { map_entry: true }
    field { name: "key" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
    field { name: "value" number: 2 type: TYPE_STRING label: LABEL_OPTIONAL }
  }
}
`

func treeDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	var fdp descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(treeFile), &fdp); err != nil {
		t.Fatal(err)
	}
	fd, err := protodesc.NewFile(&fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("Tree")
}

func TestRequestIDsMapsAndRecursion(t *testing.T) {
	md := treeDescriptor(t)
	field := func(name string) protoreflect.FieldDescriptor { return md.Fields().ByName(protoreflect.Name(name)) }
	tree := func(id string) *dynamicpb.Message {
		m := dynamicpb.NewMessage(md)
		if id != "" {
			m.Set(field("id"), protoreflect.ValueOfString(id))
		}
		return m
	}
	setMap := func(m *dynamicpb.Message, name string, k protoreflect.MapKey, v protoreflect.Value) {
		m.Mutable(field(name)).Map().Set(k, v)
	}
	str := protoreflect.ValueOfString

	for _, tc := range []struct {
		name  string
		build func() *dynamicpb.Message
		want  map[string]string
	}{
		{
			name: "string-keyed map: 16 smallest keys, recursion",
			build: func() *dynamicpb.Message {
				root := tree("root")
				for i := range 20 {
					k := fmt.Sprintf("k%02d", 19-i) // inserted largest first
					setMap(root, "children", str(k).MapKey(), protoreflect.ValueOfMessage(tree("c-"+k)))
				}
				grand := tree("")
				setMap(grand, "children", str("x").MapKey(), protoreflect.ValueOfMessage(tree("gc")))
				setMap(root, "children", str("a").MapKey(), protoreflect.ValueOfMessage(grand))
				return root
			},
			want: func() map[string]string {
				m := map[string]string{"id": "root", "children.a.children.x.id": "gc"}
				for i := range 15 { // "a" takes one of the 16 places
					k := fmt.Sprintf("k%02d", i)
					m["children."+k+".id"] = "c-" + k
				}
				return m
			}(),
		},
		{
			name: "int-keyed map in numeric order",
			build: func() *dynamicpb.Message {
				root := tree("")
				for r := int32(20); r >= -5; r-- {
					setMap(root, "by_rank", protoreflect.ValueOfInt32(r).MapKey(), protoreflect.ValueOfMessage(tree(fmt.Sprint(r))))
				}
				return root
			},
			want: func() map[string]string {
				m := map[string]string{}
				for r := -5; r <= 10; r++ {
					m[fmt.Sprintf("by_rank.%d.id", r)] = fmt.Sprint(r)
				}
				return m
			}(),
		},
		{
			name: "lists and maps of id strings; secrets and other maps skipped",
			build: func() *dynamicpb.Message {
				root := tree("root")
				peers := root.Mutable(field("peer_id")).List()
				peers.Append(str("p0"))
				peers.Append(str(""))
				peers.Append(str("p2"))
				setMap(root, "owner_id", str("alice").MapKey(), str("u1"))
				setMap(root, "labels", str("rack_id").MapKey(), str("r1"))
				root.Set(field("api_token_id"), str("t0k"))
				root.Set(field("secret"), protoreflect.ValueOfMessage(tree("hidden")))
				return root
			},
			want: map[string]string{"id": "root", "peer_id.0": "p0", "peer_id.2": "p2", "owner_id.alice": "u1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.build()
			got := RequestIDs(m)
			if !maps.Equal(got, tc.want) {
				t.Errorf("RequestIDs =\n%s\nwant\n%s", show(got), show(tc.want))
			}
			// Map order must not change the answer.
			for range 5 {
				if again := RequestIDs(m); !maps.Equal(again, got) {
					t.Fatalf("RequestIDs differs between calls:\n%s\nthen\n%s", show(got), show(again))
				}
			}
		})
	}
}

// TestMessageHolds checks the pruning: types with no id below them are not
// walked, and recursive types are.
func TestMessageHolds(t *testing.T) {
	for _, tc := range []struct {
		md   protoreflect.MessageDescriptor
		want bool
	}{
		{(&droverv1.Job{}).ProtoReflect().Descriptor(), true},
		{(&droverv1.TaskGroup{}).ProtoReflect().Descriptor(), false},
		{(&droverv1.Task{}).ProtoReflect().Descriptor(), false},
		{(&droverv1.Plan{}).ProtoReflect().Descriptor(), true},
		{(&droverv1.DesiredUpdates{}).ProtoReflect().Descriptor(), false},
		{(&droverv1.UpdateNodeStatusRequest{}).ProtoReflect().Descriptor(), true},
		{treeDescriptor(t), true},
	} {
		if got := messageHolds(tc.md, nil); got != tc.want {
			t.Errorf("messageHolds(%s) = %v, want %v", tc.md.FullName(), got, tc.want)
		}
	}
}
