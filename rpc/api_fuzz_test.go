package rpc_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server"
)

// apiMethod is one method of drover's gRPC API.
type apiMethod struct {
	name   string // full gRPC method name, /drover.v1.NodeService/Register
	desc   protoreflect.MethodDescriptor
	input  protoreflect.MessageType
	output protoreflect.MessageType
}

// apiMethods lists every method of every drover.v1 service from the
// registered descriptors, so that a method added later is fuzzed too. The
// order is fixed, so that an input means the same call in every run.
func apiMethods(tb testing.TB) []apiMethod {
	var methods []apiMethod
	var err error
	protoregistry.GlobalFiles.RangeFilesByPackage("drover.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				md := svc.Methods().Get(j)
				in, inErr := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
				out, outErr := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
				if err = errors.Join(inErr, outErr); err != nil {
					return false
				}
				methods = append(methods, apiMethod{name: "/" + string(svc.FullName()) + "/" + string(md.Name()), desc: md, input: in, output: out})
			}
		}
		return true
	})
	if err != nil || len(methods) == 0 {
		tb.Fatalf("list the API's methods: %v (found %d)", err, len(methods))
	}
	slices.SortFunc(methods, func(a, b apiMethod) int { return strings.Compare(a.name, b.name) })
	return methods
}

// membershipMethods change the raft configuration: a valid call would take
// the fuzzed single server out of its quorum and leave nothing to test.
// Only requests that must be refused for their strings are sent to them.
var membershipMethods = map[string]bool{
	droverv1.ClusterService_Join_FullMethodName:                    true,
	droverv1.OperatorService_RaftRemovePeer_FullMethodName:         true,
	droverv1.OperatorService_RaftTransferLeadership_FullMethodName: true,
}

// clearRefusals are the codes a call may fail with: each tells the caller
// what is wrong. INTERNAL and UNKNOWN never may.
var clearRefusals = map[codes.Code]bool{
	codes.InvalidArgument: true, codes.NotFound: true, codes.PermissionDenied: true,
	codes.FailedPrecondition: true, codes.ResourceExhausted: true, codes.Unavailable: true,
	codes.AlreadyExists: true, codes.OutOfRange: true, codes.Unimplemented: true,
}

// fuzzCallTimeout bounds one fuzzed call; waits in requests are cut far
// below it, so a call that reaches it hangs.
const fuzzCallTimeout = 5 * time.Second

// FuzzAPI sends requests of every method of the API, built from arbitrary
// bytes with drover's codec (which, like every vtprotobuf decoder, lets
// invalid UTF-8 through), to a real server over a real socket. Each call
// must either be refused with a code that says why (a request holding
// invalid UTF-8 or malformed unknown fields with INVALID_ARGUMENT) or
// succeed with an answer the standard runtime accepts; after every write,
// what Node.List, Job.List and StateDigest return must decode with grpc's
// standard codec, as grpcurl decodes it. One server serves the whole run.
func FuzzAPI(f *testing.F) {
	methods := apiMethods(f)
	srv := testserver.Start(f, func(c *server.Config) { c.Scheduler.NumWorkers = 0 })
	std := dialStandard(f, srv.RPCAddr())
	for _, s := range apiSeeds(f) {
		i := slices.IndexFunc(methods, func(m apiMethod) bool { return m.name == s.method })
		if i < 0 {
			f.Fatalf("seed for unknown method %s", s.method)
		}
		// The standard runtime refuses to encode the seeds holding invalid
		// UTF-8; drover's codec does not.
		data, err := rpc.Codec{}.Marshal(s.req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint16(i), data.Materialize())
	}
	for i := range methods {
		f.Add(uint16(i), []byte(nil))
	}
	f.Fuzz(func(t *testing.T, which uint16, data []byte) {
		m := methods[int(which)%len(methods)]
		req := m.input.New().Interface()
		if (rpc.Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, req) != nil {
			return
		}
		shortenWaits(req.ProtoReflect())
		portable := droverv1.CheckPortable(req) == nil
		if membershipMethods[m.name] && portable {
			return
		}
		before := srv.State().LatestIndex()
		resp, err := invoke(t.Context(), srv.Conn, m, req, portable)
		code := status.Code(err)
		switch {
		case !portable && code != codes.InvalidArgument:
			t.Fatalf("%s with a request the standard runtime refuses (%v): got %v, want INVALID_ARGUMENT", m.name, droverv1.CheckPortable(req), err)
		case err != nil && !clearRefusals[code]:
			t.Fatalf("%s: %v; want success or a clear refusal", m.name, err)
		case err == nil && resp != nil:
			if err := droverv1.CheckPortable(resp); err != nil {
				t.Fatalf("%s answered what the standard runtime refuses: %v", m.name, err)
			}
		}
		if srv.State().LatestIndex() != before {
			checkStandardDecoding(t, std)
		}
	})
}

// invoke calls m with req using drover's codec on conn and returns the
// answer: for a stream, its first message, or nil when the stream is still
// open after a moment and the request is one the server may accept.
func invoke(ctx context.Context, conn *grpc.ClientConn, m apiMethod, req proto.Message, mayAccept bool) (proto.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, fuzzCallTimeout)
	defer cancel()
	resp := m.output.New().Interface()
	if !m.desc.IsStreamingClient() && !m.desc.IsStreamingServer() {
		return resp, conn.Invoke(ctx, m.name, req, resp)
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: m.desc.IsStreamingServer(), ClientStreams: m.desc.IsStreamingClient()}, m.name)
	if err != nil {
		return nil, err
	}
	if err := stream.SendMsg(req); err != nil {
		return nil, err
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	// A stream the server accepted may wait for events for ever; one it
	// refuses ends at once. Cut the wait short, as a success, unless the
	// request must be refused.
	first := make(chan error, 1)
	go func() { first <- stream.RecvMsg(resp) }()
	var cut <-chan time.Time
	if mayAccept {
		cut = time.After(100 * time.Millisecond)
	}
	select {
	case err := <-first:
		return resp, err
	case <-cut:
		cancel()
		<-first
		return nil, nil
	}
}

// shortenWaits cuts the waits a request may ask for (blocking queries'
// min_index and max_wait, a dequeue's timeout) to at most a millisecond,
// so that every call answers at once. It goes by field name, so new
// blocking requests are covered when they use the same names.
func shortenWaits(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap():
			shortenWaits(v.Message())
		case fd.Name() == "min_index":
			m.Clear(fd)
		case (fd.Name() == "max_wait" || fd.Name() == "timeout") && fd.Kind() == protoreflect.Int64Kind && !fd.IsList():
			if w := v.Int(); w <= 0 || w > int64(time.Millisecond) {
				m.Set(fd, protoreflect.ValueOfInt64(int64(time.Millisecond)))
			}
		}
		return true
	})
}

type apiSeed struct {
	method string
	req    proto.Message
}

// apiSeeds are valid requests that write, and the same holding invalid
// UTF-8 where it used to get through: node names and attributes, job meta,
// task group names, strings in repeated fields, a stream's request.
func apiSeeds(tb testing.TB) []apiSeed {
	tb.Helper()
	node := func(change func(*droverv1.Node)) *droverv1.RegisterNodeRequest {
		n := mock.Node()
		change(n)
		return &droverv1.RegisterNodeRequest{Node: n}
	}
	job := func(change func(*droverv1.Job)) *droverv1.RegisterJobRequest {
		j := mock.Job(1)
		change(j)
		return &droverv1.RegisterJobRequest{Job: j}
	}
	registerNode := droverv1.NodeService_Register_FullMethodName
	registerJob := droverv1.JobService_Register_FullMethodName
	return []apiSeed{
		{registerNode, node(func(*droverv1.Node) {})},
		{registerNode, node(func(n *droverv1.Node) { n.Name = bad })},
		{registerNode, node(func(n *droverv1.Node) { n.Attributes["kernel.name"] = bad })},
		{registerNode, node(func(n *droverv1.Node) { n.Attributes[bad] = "x" })},
		{registerJob, job(func(*droverv1.Job) {})},
		{registerJob, job(func(j *droverv1.Job) { j.Meta = map[string]string{"owner": bad} })},
		{registerJob, job(func(j *droverv1.Job) { j.Meta = map[string]string{bad: "x"} })},
		{registerJob, job(func(j *droverv1.Job) { j.TaskGroups[0].Name = bad })},
		{registerJob, job(func(j *droverv1.Job) { j.Datacenters = append(j.Datacenters, bad) })},
		{droverv1.NodeService_UpdateAlloc_FullMethodName, &droverv1.UpdateAllocRequest{NodeId: mock.ID(), SecretId: mock.ID(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: mock.ID(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, ClientDescription: bad}}}},
		{droverv1.NodeService_List_FullMethodName, &droverv1.ListNodesRequest{Page: &droverv1.PageOptions{Prefix: bad}}},
		{droverv1.EventService_Stream_FullMethodName, &droverv1.StreamEventsRequest{Keys: []string{bad}}},
		{droverv1.ClusterService_Join_FullMethodName, &droverv1.JoinRequest{Server: &droverv1.ServerMember{Id: bad, RpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", Version: "0.1.0"}}},
	}
}
