package rpc_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// env is a real single server (raft on disk, gRPC on loopback) and clients
// of every service.
type env struct {
	t      *testing.T
	srv    *testserver.Server
	nodes  droverv1.NodeServiceClient
	jobs   droverv1.JobServiceClient
	allocs droverv1.AllocServiceClient
	evals  droverv1.EvalServiceClient
	events droverv1.EventServiceClient
}

func newEnv(t *testing.T, opts ...func(*server.Config)) *env {
	t.Helper()
	// These tests check the API against the state they write themselves:
	// no scheduler workers run to change it behind their back.
	noWorkers := func(c *server.Config) { c.Scheduler.NumWorkers = 0 }
	srv := testserver.Start(t, append([]func(*server.Config){noWorkers}, opts...)...)
	return &env{
		t:      t,
		srv:    srv,
		nodes:  droverv1.NewNodeServiceClient(srv.Conn),
		jobs:   droverv1.NewJobServiceClient(srv.Conn),
		allocs: droverv1.NewAllocServiceClient(srv.Conn),
		evals:  droverv1.NewEvalServiceClient(srv.Conn),
		events: droverv1.NewEventServiceClient(srv.Conn),
	}
}

// ctx bounds one call of a test.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// register registers a mock node and returns it (with its secret).
func (e *env) register() *droverv1.Node {
	e.t.Helper()
	n := mock.Node()
	if _, err := e.nodes.Register(e.ctx(), &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
		e.t.Fatalf("register node: %v", err)
	}
	return n
}

func (e *env) heartbeat(n *droverv1.Node) *droverv1.UpdateNodeStatusResponse {
	e.t.Helper()
	resp, err := e.nodes.UpdateStatus(e.ctx(), &droverv1.UpdateNodeStatusRequest{
		NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY,
	})
	if err != nil {
		e.t.Fatalf("heartbeat of %s: %v", n.GetId(), err)
	}
	return resp
}

func (e *env) report(n *droverv1.Node, status droverv1.AllocClientStatus, allocIDs ...string) (*droverv1.UpdateAllocResponse, error) {
	req := &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId()}
	for _, id := range allocIDs {
		req.Allocs = append(req.Allocs, &droverv1.AllocClientUpdate{AllocId: id, ClientStatus: status})
	}
	return e.nodes.UpdateAlloc(e.ctx(), req)
}

// apply writes a raft entry the way the leader's own components will (the
// heartbeat timers, the plan applier), which no RPC offers yet.
func (e *env) apply(msgType droverv1.MessageType, entry interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}) uint64 {
	e.t.Helper()
	index, _, err := e.srv.Apply(e.ctx(), msgType, entry)
	if err != nil {
		e.t.Fatalf("apply %s: %v", msgType, err)
	}
	return index
}

// setStatus moves a node to a status as the leader's heartbeat timers do.
func (e *env) setStatus(n *droverv1.Node, status droverv1.NodeStatus) {
	e.t.Helper()
	e.apply(droverv1.MessageTypeNodeStatus, &droverv1.NodeStatusEntry{NodeId: n.GetId(), Status: status, UpdatedAt: time.Now().UnixNano()})
}

// job registers a mock job through the API and returns it as stored.
func (e *env) job(count int32) *droverv1.Job {
	e.t.Helper()
	j := mock.Job(count)
	if _, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: j}); err != nil {
		e.t.Fatalf("register job: %v", err)
	}
	return e.srv.State().Snapshot().JobByID(j.GetId())
}

// place writes allocations of job on node through a plan result, as the
// plan applier will, and returns them as stored.
func (e *env) place(n *droverv1.Node, job *droverv1.Job, count int) []*droverv1.Allocation {
	e.t.Helper()
	entry := &droverv1.PlanResultEntry{AppliedAt: time.Now().UnixNano()}
	for i := range count {
		entry.Allocations = append(entry.Allocations, mock.Alloc(n, job, i))
	}
	e.apply(droverv1.MessageTypePlanResult, entry)
	snap := e.srv.State().Snapshot()
	out := make([]*droverv1.Allocation, count)
	for i, a := range entry.GetAllocations() {
		out[i] = snap.AllocByID(a.GetId())
	}
	return out
}

func (e *env) node(id string) *droverv1.Node {
	return e.srv.State().Snapshot().NodeByID(id)
}

func (e *env) latestIndex() uint64 { return e.srv.State().LatestIndex() }

// wantCode fails unless err is a gRPC status with code want.
func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("code = %s (%v), want %s", got, err, want)
	}
}

// badFields returns the fields named in an INVALID_ARGUMENT's BadRequest.
func badFields(err error) []string {
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

// wantInvalid fails unless err is INVALID_ARGUMENT naming field.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	wantCode(t, err, codes.InvalidArgument)
	if fields := badFields(err); !slices.Contains(fields, field) {
		t.Fatalf("violations name %v, want %q", fields, field)
	}
}

// retryInfo reports whether an UNAVAILABLE carries a retry hint.
func retryInfo(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}

var errTimeout = errors.New("timed out")
