package rpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// testTimeout bounds the calls of one check.
const testTimeout = 30 * time.Second

// bad is a string that is not valid UTF-8: a lone continuation byte.
const bad = "bad\x80name"

// TestInvalidUTF8IsRefused sends requests holding invalid UTF-8 through a
// real server with drover's codec (which, like any vtprotobuf decoder, does
// not check UTF-8 itself). Each must be refused INVALID_ARGUMENT naming the
// field, nothing may be written, and everything the API returns afterwards
// must decode with the standard protobuf runtime, as grpcurl and other
// reflection-based clients decode it.
func TestInvalidUTF8IsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	job := mock.Job(1)
	if _, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: job.CloneVT()}); err != nil {
		t.Fatal(err)
	}
	std := dialStandard(t, e.srv.RPCAddr())

	nodeWith := func(change func(n *droverv1.Node)) func(context.Context) error {
		return func(ctx context.Context) error {
			n := mock.Node()
			change(n)
			_, err := e.nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: n})
			return err
		}
	}
	jobWith := func(change func(j *droverv1.Job)) func(context.Context) error {
		return func(ctx context.Context) error {
			j := job.CloneVT()
			change(j)
			_, err := e.jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: j})
			return err
		}
	}
	tests := []struct {
		name  string
		call  func(context.Context) error
		field string
	}{
		{"node name", nodeWith(func(n *droverv1.Node) { n.Name = bad }), "node.name"},
		{"node attribute value", nodeWith(func(n *droverv1.Node) { n.Attributes["kernel.name"] = bad }),
			`node.attributes["kernel.name"]`},
		{"node attribute key", nodeWith(func(n *droverv1.Node) { n.Attributes[bad] = "x" }),
			`node.attributes["bad\x80name"]`},
		{"job meta value", jobWith(func(j *droverv1.Job) { j.Meta = map[string]string{"owner": bad} }),
			`job.meta["owner"]`},
		{"job meta key", jobWith(func(j *droverv1.Job) { j.Meta = map[string]string{bad: "x"} }),
			`job.meta["bad\x80name"]`},
		{"task group meta value", jobWith(func(j *droverv1.Job) { j.TaskGroups[0].Meta = map[string]string{"owner": bad} }),
			`job.task_groups[0].meta["owner"]`},
		{"task group name", jobWith(func(j *droverv1.Job) { j.TaskGroups[0].Name = bad }),
			"job.task_groups[0].name"},
		{"repeated string", jobWith(func(j *droverv1.Job) { j.Datacenters = append(j.Datacenters, bad) }),
			"job.datacenters[1]"},
		{"string in a repeated message", func(ctx context.Context) error {
			_, err := e.nodes.UpdateAlloc(ctx, &droverv1.UpdateAllocRequest{NodeId: mock.ID(), SecretId: mock.ID(),
				Allocs: []*droverv1.AllocClientUpdate{{AllocId: mock.ID(), ClientStatus: running, ClientDescription: bad}}})
			return err
		}, "allocs[0].client_description"},
		{"malformed unknown fields", nodeWith(func(n *droverv1.Node) { n.ProtoReflect().SetUnknown(malformedUnknown) }), "node"},
		{"query string", func(ctx context.Context) error {
			_, err := e.nodes.List(ctx, &droverv1.ListNodesRequest{Page: &droverv1.PageOptions{Prefix: bad}})
			return err
		}, "page.prefix"},
		{"stream request", func(ctx context.Context) error {
			stream, err := e.events.Stream(ctx, &droverv1.StreamEventsRequest{Keys: []string{"a", bad}})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}, "keys[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.srv.State().LatestIndex()
			err := tt.call(e.ctx())
			if got := e.srv.State().LatestIndex(); got != before {
				t.Errorf("the refused call wrote to raft: index %d -> %d", before, got)
			}
			checkStandardDecoding(t, std)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want INVALID_ARGUMENT", err)
			}
			if got := violatedFields(err); len(got) != 1 || got[0] != tt.field {
				t.Errorf("violations name %q, want [%q]", got, tt.field)
			}
		})
	}
}

// malformedUnknown is an unknown group whose end tag names another field:
// vtprotobuf's decoder keeps it, the standard runtime cannot decode it.
var malformedUnknown = protowire.AppendTag(protowire.AppendTag(nil, 100, protowire.StartGroupType), 101, protowire.EndGroupType)

// dialStandard connects with grpc's standard proto codec, which checks
// UTF-8 as every reflection-based client (grpcurl) does.
func dialStandard(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// checkStandardDecoding lists nodes and jobs and asks for the state digest
// with the standard codec: each must succeed, and what they return must
// marshal with the standard runtime.
func checkStandardDecoding(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	nodes, err := droverv1.NewNodeServiceClient(conn).List(ctx, &droverv1.ListNodesRequest{})
	if err != nil {
		t.Fatalf("Node.List with the standard codec: %v", err)
	}
	jobs, err := droverv1.NewJobServiceClient(conn).List(ctx, &droverv1.ListJobsRequest{})
	if err != nil {
		t.Fatalf("Job.List with the standard codec: %v", err)
	}
	digest, err := droverv1.NewOperatorServiceClient(conn).StateDigest(ctx, &droverv1.StateDigestRequest{})
	if err != nil {
		t.Fatalf("StateDigest with the standard codec: %v", err)
	}
	for _, m := range []proto.Message{nodes, jobs, digest} {
		if _, err := proto.Marshal(m); err != nil {
			t.Errorf("proto.Marshal(%T): %v", m, err)
		}
	}
}

// violatedFields returns the fields of an error's BadRequest detail.
func violatedFields(err error) []string {
	var fields []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	return fields
}
