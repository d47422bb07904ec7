package droverv1_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// bad is not valid UTF-8: a lone continuation byte.
const bad = "a\x80b"

type vtMessage interface {
	proto.Message
	MarshalVT() ([]byte, error)
	UnmarshalVT([]byte) error
}

func TestCheckPortableNamesTheField(t *testing.T) {
	node := func(change func(*droverv1.Node)) vtMessage {
		n := mock.Node()
		change(n)
		return &droverv1.RegisterNodeRequest{Node: n}
	}
	job := func(change func(*droverv1.Job)) vtMessage {
		j := mock.Job(1)
		change(j)
		return &droverv1.RegisterJobRequest{Job: j}
	}
	tests := []struct {
		name  string
		msg   vtMessage
		field string // empty: valid
	}{
		{"valid node", node(func(*droverv1.Node) {}), ""},
		{"valid non-ASCII", node(func(n *droverv1.Node) { n.Name = "nœud-日本" }), ""},
		{"nil message", (*droverv1.RegisterNodeRequest)(nil), ""},
		{"node name", node(func(n *droverv1.Node) { n.Name = bad }), "node.name"},
		{"attribute value", node(func(n *droverv1.Node) { n.Attributes["kernel.name"] = bad }), `node.attributes["kernel.name"]`},
		{"attribute key", node(func(n *droverv1.Node) { n.Attributes[bad] = "x" }), `node.attributes["a\x80b"]`},
		{"truncated rune", node(func(n *droverv1.Node) { n.Name = "日本"[:4] }), "node.name"},
		{"first in field order", node(func(n *droverv1.Node) { n.Attributes["rack"] = bad; n.Name = bad }), "node.name"},
		{"first map key in order", node(func(n *droverv1.Node) { n.Attributes["rack"] = bad; n.Attributes["cpu.arch"] = bad }),
			`node.attributes["cpu.arch"]`},
		{"group meta", job(func(j *droverv1.Job) { j.TaskGroups[0].Meta = map[string]string{"owner": bad} }),
			`job.task_groups[0].meta["owner"]`},
		{"task config", job(func(j *droverv1.Job) { j.TaskGroups[0].Tasks[0].Config["command"] = bad }),
			`job.task_groups[0].tasks[0].config["command"]`},
		{"repeated string", job(func(j *droverv1.Job) { j.Datacenters = append(j.Datacenters, bad) }), "job.datacenters[1]"},
		{"oneof", &droverv1.StreamEventsResponse{Events: []*droverv1.Event{{Key: "k"},
			{Payload: &droverv1.Event_Job{Job: &droverv1.Job{Meta: map[string]string{"x": bad}}}}}}, `events[1].job.meta["x"]`},
		{"malformed unknown fields", node(func(n *droverv1.Node) { n.ProtoReflect().SetUnknown(malformed) }), "node"},
		{"malformed unknown fields at the top", withUnknown(&droverv1.RegisterNodeRequest{Node: mock.Node()}, malformed), "(request)"},
		{"well-formed unknown fields", node(func(n *droverv1.Node) { n.ProtoReflect().SetUnknown(wellFormed) }), ""},
		{"message-valued map key", &droverv1.AllocDesiredTransitionEntry{Transitions: map[string]*droverv1.DesiredTransition{
			"ok": {Migrate: true}, bad: {Migrate: true}}}, `transitions["a\x80b"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := droverv1.CheckPortable(tt.msg)
			if got := violatedField(t, err); got != tt.field {
				t.Errorf("CheckPortable = %v, want a violation of %q", err, tt.field)
			}
			if err != nil && !utf8.ValidString(err.Error()) {
				t.Errorf("the error is not valid UTF-8 itself: %q", err.Error())
			}
			b, mErr := tt.msg.MarshalVT()
			if mErr != nil {
				t.Fatal(mErr)
			}
			if got := droverv1.NewWireScanner(tt.msg.ProtoReflect().Descriptor()).Portable(b); got != (tt.field == "") {
				t.Errorf("WireScanner.Portable = %v, want %v", got, tt.field == "")
			}
			if uErr := proto.Unmarshal(b, tt.msg.ProtoReflect().Type().New().Interface()); (uErr == nil) != (tt.field == "") {
				t.Errorf("the standard runtime disagrees: proto.Unmarshal error %v", uErr)
			}
		})
	}
}

// malformed is an unknown group whose end tag names another field:
// vtprotobuf's decoder keeps it, the standard one refuses it.
var malformed = protowire.AppendTag(protowire.AppendTag(nil, 100, protowire.StartGroupType), 101, protowire.EndGroupType)

// wellFormed is an unknown varint field 99 = 1.
var wellFormed = protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)

func withUnknown[M proto.Message](m M, b []byte) M {
	m.ProtoReflect().SetUnknown(b)
	return m
}

func violatedField(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	verr, ok := err.(*droverv1.ValidationError)
	if !ok || len(verr.Violations) != 1 {
		t.Fatalf("want one violation, got %#v", err)
	}
	return verr.Violations[0].Field
}

func TestMakePortable(t *testing.T) {
	tests := []struct {
		name     string
		msg      proto.Message
		want     proto.Message
		repaired int
	}{
		{"valid stays", mockNode("n", map[string]string{"k": "v"}), mockNode("n", map[string]string{"k": "v"}), 0},
		{"name and value", mockNode(bad, map[string]string{"k": "x\xff\xfey"}),
			mockNode("a\uFFFDb", map[string]string{"k": "x\uFFFDy"}), 2},
		{"key", mockNode("n", map[string]string{bad: "v"}), mockNode("n", map[string]string{"a\uFFFDb": "v"}), 1},
		// A repaired key never overrides a valid one; among repaired keys
		// the smallest original wins.
		// (A run of invalid bytes becomes one U+FFFD.)
		{"colliding keys", mockNode("n", map[string]string{"a\xff": "ff", "a\xfe": "fe", "a\xfd\xfd": "fdfd", "b\xff": "b"}),
			mockNode("n", map[string]string{"a\uFFFD": "fdfd", "b\uFFFD": "b"}), 4},
		{"repaired key meets a valid one", mockNode("n", map[string]string{"a\xff": "ff", "a\uFFFD": "valid"}),
			mockNode("n", map[string]string{"a\uFFFD": "valid"}), 1},
		{"oneof and message-valued map", &droverv1.Event{Payload: &droverv1.Event_Node{Node: mockNode(bad, nil)}},
			&droverv1.Event{Payload: &droverv1.Event_Node{Node: mockNode("a\uFFFDb", nil)}}, 1},
		{"map of messages", &droverv1.AllocDesiredTransitionEntry{Transitions: map[string]*droverv1.DesiredTransition{bad: {Migrate: true}}},
			&droverv1.AllocDesiredTransitionEntry{Transitions: map[string]*droverv1.DesiredTransition{"a\uFFFDb": {Migrate: true}}}, 1},
		{"malformed unknown fields dropped", withUnknown(mockNode("n", nil), malformed), mockNode("n", nil), 1},
		{"well-formed unknown fields kept", withUnknown(mockNode("n", nil), wellFormed), withUnknown(mockNode("n", nil), wellFormed), 0},
		{"repeated", &droverv1.Job{Datacenters: []string{"dc1", bad}}, &droverv1.Job{Datacenters: []string{"dc1", "a\uFFFDb"}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Go randomizes map order: repeat to see that the result does not
			// depend on it.
			for range 20 {
				m := proto.Clone(tt.msg)
				if n := droverv1.MakePortable(m); n != tt.repaired {
					t.Errorf("repaired %d strings, want %d", n, tt.repaired)
				}
				if !proto.Equal(m, tt.want) {
					t.Fatalf("repaired to %v, want %v", m, tt.want)
				}
				if err := droverv1.CheckPortable(m); err != nil {
					t.Fatalf("still invalid after repair: %v", err)
				}
			}
		})
	}
}

func mockNode(name string, attrs map[string]string) *droverv1.Node {
	return &droverv1.Node{Id: "id", Name: name, Attributes: attrs}
}

// droverMessages lists every message type of the drover.v1 package.
func droverMessages(t testing.TB) []protoreflect.MessageType {
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() == "drover.v1" {
			types = append(types, mt)
		}
		return true
	})
	if len(types) == 0 {
		t.Fatal("no drover.v1 messages registered")
	}
	// RangeMessages has no defined order; the fuzzer's kind byte must
	// mean the same type in every run.
	slices.SortFunc(types, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	return types
}

// FuzzPortable decodes arbitrary bytes as any drover message with
// vtprotobuf's decoder (which checks neither UTF-8 nor unknown fields) and
// checks the three helpers against the standard runtime: the wire scan and
// the check agree with proto.Unmarshal, and a repaired message always
// passes.
func FuzzPortable(f *testing.F) {
	types := droverMessages(f)
	for _, m := range []vtMessage{
		&droverv1.RegisterNodeRequest{Node: mockNode(bad, map[string]string{bad: bad, "k": "v"})},
		&droverv1.RegisterJobRequest{Job: mock.Job(2)},
		&droverv1.AllocDesiredTransitionEntry{Transitions: map[string]*droverv1.DesiredTransition{bad: {Migrate: true}}},
	} {
		b, err := m.MarshalVT()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint16(indexOf(types, m.ProtoReflect().Descriptor().FullName())), b)
	}
	var scanners droverv1.WireScanners
	f.Fuzz(func(t *testing.T, kind uint16, data []byte) {
		mt := types[int(kind)%len(types)]
		md := mt.Descriptor()
		wireOK := scanners.Portable(md, data)
		stdErr := proto.Unmarshal(data, mt.New().Interface())
		if wireOK != (stdErr == nil) {
			t.Fatalf("%s: WireScanner.Portable = %v, proto.Unmarshal error %v", md.FullName(), wireOK, stdErr)
		}
		m, ok := mt.New().Interface().(vtMessage)
		if !ok {
			t.Fatalf("%s has no vtprotobuf decoder", md.FullName())
		}
		if m.UnmarshalVT(data) != nil {
			return
		}
		// vtprotobuf decodes some non-canonical encodings differently from
		// the standard runtime (a map key sent with the wrong wire type), so
		// the decoded message is compared on its own encoding, which is what
		// raft entries and answers hold.
		checkErr := droverv1.CheckPortable(m)
		canonical, err := m.MarshalVT()
		if err != nil {
			t.Fatalf("%s: re-encode: %v", md.FullName(), err)
		}
		if got := scanners.Portable(md, canonical); got != (checkErr == nil) {
			t.Fatalf("%s: WireScanner.Portable of the encoding = %v, CheckPortable = %v", md.FullName(), got, checkErr)
		}
		if err := proto.Unmarshal(canonical, mt.New().Interface()); (err == nil) != (checkErr == nil) {
			t.Fatalf("%s: CheckPortable = %v, proto.Unmarshal of the encoding: %v", md.FullName(), checkErr, err)
		}
		before := proto.Clone(m)
		n := droverv1.MakePortable(m)
		if err := droverv1.CheckPortable(m); err != nil {
			t.Fatalf("%s: invalid after repair: %v", md.FullName(), err)
		}
		if (n == 0) != (checkErr == nil) || (n == 0 && !proto.Equal(before, m)) {
			t.Fatalf("%s: repaired %d strings of a message whose check said %v", md.FullName(), n, checkErr)
		}
	})
}

func indexOf(types []protoreflect.MessageType, name protoreflect.FullName) int {
	for i, mt := range types {
		if mt.Descriptor().FullName() == name {
			return i
		}
	}
	panic(fmt.Sprintf("%s is not registered", name))
}

// BenchmarkPortableCheck compares the two ways of checking an encoded raft
// entry before it is proposed: a protoreflect walk over the message
// (CheckPortable), and a protowire scan of its bytes guided by a table built
// from the descriptor (WireScanner). Encode is what server.Apply already
// pays to marshal the entry, for scale.
func BenchmarkPortableCheck(b *testing.B) {
	node := mock.Node()
	for i := range 20 {
		node.Attributes[fmt.Sprintf("attr.%d", i)] = fmt.Sprintf("value-%d", i)
	}
	entries := []struct {
		name string
		msg  vtMessage
	}{
		{"NodeRegister", &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{node}, RegisteredAt: 1}},
		{"PlanResult1000", planResult(1000)},
		{"PlanResult20000", planResult(20000)},
	}
	for _, e := range entries {
		data, err := e.msg.MarshalVT()
		if err != nil {
			b.Fatal(err)
		}
		md := e.msg.ProtoReflect().Descriptor()
		b.Run(e.name+"/reflect", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if droverv1.CheckPortable(e.msg) != nil {
					b.Fatal("invalid")
				}
			}
		})
		scanner := droverv1.NewWireScanner(md)
		b.Run(e.name+"/wire", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if !scanner.Portable(data) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(e.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := e.msg.MarshalVT(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// planResult is a plan placing n allocations of one job over 100 nodes.
func planResult(n int) *droverv1.PlanResultEntry {
	job := mock.Job(int32(n))
	nodes := make([]*droverv1.Node, 100)
	for i := range nodes {
		nodes[i] = mock.Node()
	}
	entry := &droverv1.PlanResultEntry{EvalId: mock.ID(), AppliedAt: 1,
		Evals: []*droverv1.Evaluation{mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)}}
	for i := range n {
		entry.Allocations = append(entry.Allocations, mock.Alloc(nodes[i%len(nodes)], job, i))
	}
	return entry
}
