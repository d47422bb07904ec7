package rpc

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestCallClasses(t *testing.T) {
	tests := []struct {
		method string
		want   callClass
	}{
		{droverv1.NodeService_Register_FullMethodName, classAgent},
		{droverv1.NodeService_UpdateStatus_FullMethodName, classAgent},
		{droverv1.NodeService_UpdateAlloc_FullMethodName, classAgent},
		{droverv1.NodeService_GetAllocs_FullMethodName, classAgent},
		{droverv1.NodeService_List_FullMethodName, classList},
		{droverv1.NodeService_Get_FullMethodName, classOperator},
		{droverv1.NodeService_UpdateDrain_FullMethodName, classOperator},
		{droverv1.JobService_Register_FullMethodName, classOperator},
		{droverv1.JobService_List_FullMethodName, classList},
		{droverv1.JobService_Allocations_FullMethodName, classList},
		{droverv1.AllocService_List_FullMethodName, classList},
		{droverv1.EvalService_List_FullMethodName, classList},
		{droverv1.OperatorService_StateDigest_FullMethodName, classList},
		{droverv1.JobService_Get_FullMethodName, classOperator},
		{droverv1.OperatorService_ServerMembers_FullMethodName, classOperator},
		{droverv1.OperatorService_RaftListPeers_FullMethodName, classOperator},
		{droverv1.EventService_Stream_FullMethodName, classOperator},
		{droverv1.SchedulerService_Dequeue_FullMethodName, classServer},
		{droverv1.SchedulerService_SubmitPlan_FullMethodName, classServer},
		{droverv1.ClusterService_Join_FullMethodName, classServer},
		{droverv1.ClusterService_ReadIndex_FullMethodName, classServer},
		{droverv1.ClusterService_Info_FullMethodName, classServer},
		{healthpb.Health_Check_FullMethodName, classServer},
		// A look-alike service name is not the scheduler's.
		{"/" + droverv1.SchedulerService_ServiceDesc.ServiceName + "x/Dequeue", classOperator},
		{"/unknown.Service/Method", classOperator},
	}
	for _, tt := range tests {
		if got := classOf(tt.method); got != tt.want {
			t.Errorf("classOf(%s) = %s, want %s", tt.method, got, tt.want)
		}
	}
	// Every method of the scheduler and cluster services is the cluster's.
	for _, sd := range []grpc.ServiceDesc{droverv1.SchedulerService_ServiceDesc, droverv1.ClusterService_ServiceDesc} {
		for _, m := range sd.Methods {
			if name := "/" + sd.ServiceName + "/" + m.MethodName; classOf(name) != classServer {
				t.Errorf("%s is not in the server class", name)
			}
		}
	}
}

func TestBlockingQuery(t *testing.T) {
	tests := []struct {
		name string
		req  any
		want bool
	}{
		{"list without query", &droverv1.ListNodesRequest{}, false},
		{"list at index 0", &droverv1.ListNodesRequest{Query: &droverv1.QueryOptions{AllowStale: true}}, false},
		{"list past an index", &droverv1.ListNodesRequest{Query: &droverv1.QueryOptions{MinIndex: 7}}, true},
		{"get job past an index", &droverv1.GetJobRequest{JobId: "j", Query: &droverv1.QueryOptions{MinIndex: 1}}, true},
		{"alloc poll at once", &droverv1.GetAllocsRequest{NodeId: "n"}, false},
		{"alloc poll past an index", &droverv1.GetAllocsRequest{NodeId: "n", MinIndex: 3}, true},
		{"heartbeat", &droverv1.UpdateNodeStatusRequest{NodeId: "n"}, false},
	}
	for _, tt := range tests {
		if got := blockingQuery(tt.req); got != tt.want {
			t.Errorf("%s: blockingQuery = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestGateBoundsInFlight(t *testing.T) {
	type step struct {
		op   string // take or release
		want bool   // for take: whether a slot was free
	}
	tests := []struct {
		name  string
		max   int64
		steps []step
		// inFlight and refused after the steps.
		inFlight int64
		refused  uint64
	}{
		{"one slot", 1, []step{{"take", true}, {"take", false}, {"release", false}, {"take", true}}, 1, 1},
		{"fills and drains", 2, []step{{"take", true}, {"take", true}, {"take", false}, {"take", false},
			{"release", false}, {"release", false}}, 0, 2},
		{"refusal takes nothing", 1, []step{{"take", true}, {"take", false}, {"release", false}, {"take", true}, {"take", false}}, 1, 2},
	}
	for _, tt := range tests {
		g := &gate{max: tt.max}
		for i, s := range tt.steps {
			switch s.op {
			case "take":
				if got := g.tryTake(); got != s.want {
					t.Errorf("%s: step %d: tryTake = %v, want %v", tt.name, i, got, s.want)
				}
			case "release":
				g.release()
			}
		}
		if got := g.inFlight.Load(); got != tt.inFlight {
			t.Errorf("%s: %d in flight, want %d", tt.name, got, tt.inFlight)
		}
		if got := g.refused.Load(); got != tt.refused {
			t.Errorf("%s: %d refused, want %d", tt.name, got, tt.refused)
		}
	}
}

// admitted runs one call through the stats handler and the interceptor
// the way gRPC does: tag, intercept, end. handler runs as the call's
// handler; end is called when the call should end.
type admitted struct {
	a   *admission
	ctx context.Context
}

func startCall(a *admission, method string) admitted {
	return admitted{a: a, ctx: a.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: method})}
}

func (c admitted) intercept(method string, req any, handler grpc.UnaryHandler) error {
	_, err := c.a.unary(c.ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, handler)
	return err
}

func (c admitted) end() { c.a.HandleRPC(c.ctx, &stats.End{}) }

func testAdmission(agents, operators int) *admission {
	return newAdmission(Limits{MaxAgentCalls: agents, MaxListCalls: operators, MaxOperatorCalls: operators}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func ok(context.Context, any) (any, error) { return &droverv1.ListNodesResponse{}, nil }

// wantRefused fails unless err is RESOURCE_EXHAUSTED with a RetryInfo hint.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%s: %v (code %s), want ResourceExhausted", what, err, st.Code())
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			return
		}
	}
	t.Fatalf("%s: %v carries no RetryInfo", what, err)
}

// TestOperatorBoundRefusesAtOnce holds the only operator slot with a call
// whose handler blocks, and checks that the next operator call is refused
// at once (while the first still runs) with a retry hint, that agents'
// and servers' calls still get through, and that the slot is free again
// only once the first call has ended (its answer sent), not when its
// handler returned.
func TestOperatorBoundRefusesAtOnce(t *testing.T) {
	a := testAdmission(2, 1)
	list := droverv1.NodeService_List_FullMethodName
	first := startCall(a, list)
	entered, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- first.intercept(list, &droverv1.ListNodesRequest{}, func(context.Context, any) (any, error) {
			close(entered)
			<-finish
			return &droverv1.ListNodesResponse{}, nil
		})
	}()
	<-entered

	second := startCall(a, list)
	wantRefused(t, "second operator call", second.intercept(list, &droverv1.ListNodesRequest{}, ok))
	second.end()

	for _, m := range []string{droverv1.NodeService_UpdateStatus_FullMethodName, droverv1.SchedulerService_Dequeue_FullMethodName,
		droverv1.ClusterService_Info_FullMethodName} {
		c := startCall(a, m)
		if err := c.intercept(m, &droverv1.UpdateNodeStatusRequest{}, ok); err != nil {
			t.Errorf("%s while operators are full: %v", m, err)
		}
		c.end()
	}

	close(finish)
	if err := <-done; err != nil {
		t.Fatalf("first call: %v", err)
	}
	// Answered but not yet sent: the slot is still held.
	third := startCall(a, list)
	wantRefused(t, "operator call before the first has ended", third.intercept(list, &droverv1.ListNodesRequest{}, ok))
	third.end()
	first.end()
	fourth := startCall(a, list)
	if err := fourth.intercept(list, &droverv1.ListNodesRequest{}, ok); err != nil {
		t.Fatalf("operator call after the first ended: %v", err)
	}
	fourth.end()
	if st := a.list.inFlight.Load(); st != 0 {
		t.Errorf("%d operator calls in flight after every call ended, want 0", st)
	}
	if got := a.list.refused.Load(); got != 2 {
		t.Errorf("%d operator calls refused, want 2", got)
	}
}

// TestAgentBoundIsSeparate fills the agent class and checks that agents
// are refused while operators are not.
func TestAgentBoundIsSeparate(t *testing.T) {
	a := testAdmission(1, 1)
	hb := droverv1.NodeService_UpdateStatus_FullMethodName
	first := startCall(a, hb)
	if err := first.intercept(hb, &droverv1.UpdateNodeStatusRequest{}, ok); err != nil {
		t.Fatal(err)
	}
	second := startCall(a, hb)
	wantRefused(t, "second heartbeat", second.intercept(hb, &droverv1.UpdateNodeStatusRequest{}, ok))
	second.end()
	op := startCall(a, droverv1.JobService_List_FullMethodName)
	if err := op.intercept(droverv1.JobService_List_FullMethodName, &droverv1.ListJobsRequest{}, ok); err != nil {
		t.Errorf("operator call while agents are full: %v", err)
	}
	op.end()
	first.end()
	third := startCall(a, hb)
	if err := third.intercept(hb, &droverv1.UpdateNodeStatusRequest{}, ok); err != nil {
		t.Errorf("heartbeat after the first ended: %v", err)
	}
	third.end()
}

// TestBlockingQueryHoldsNoSlotWhileWaiting runs blocking queries through
// the interceptor and heldWhileReading: a read that is not yet past the
// index gives its slot back before the wait, so other operator calls get
// through; the read that answers keeps it until the call ends; a query
// whose wait ended without a change takes one for its answer, and is
// refused when none is free.
func TestBlockingQueryHoldsNoSlotWhileWaiting(t *testing.T) {
	a := testAdmission(1, 1)
	list := droverv1.NodeService_List_FullMethodName
	req := &droverv1.ListNodesRequest{Query: &droverv1.QueryOptions{MinIndex: 10}}
	other := func() error {
		c := startCall(a, list)
		defer c.end()
		return c.intercept(list, &droverv1.ListNodesRequest{}, ok)
	}

	// Reads at index 10 (not past it), then 11 (the answer).
	q := startCall(a, list)
	var readsHeld []bool
	indexes := []uint64{10, 11}
	err := q.intercept(list, req, func(ctx context.Context, _ any) (any, error) {
		read := heldWhileReading(ctx, 10, func(*state.Snapshot) (uint64, error) {
			readsHeld = append(readsHeld, a.list.inFlight.Load() == 1)
			return indexes[len(readsHeld)-1], nil
		})
		for range indexes {
			if _, err := read(nil); err != nil {
				return nil, err
			}
			if len(readsHeld) == 1 {
				// Waiting: another operator call gets the slot.
				if err := other(); err != nil {
					t.Errorf("operator call while a blocking query waits: %v", err)
				}
			}
		}
		return &droverv1.ListNodesResponse{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(readsHeld) != 2 || !readsHeld[0] || !readsHeld[1] {
		t.Errorf("reads held a slot: %v, want both", readsHeld)
	}
	wantRefused(t, "operator call while the answer is sent", other())
	q.end()
	if err := other(); err != nil {
		t.Fatalf("operator call after the blocking query ended: %v", err)
	}

	// A wait that ends without a change answers with a slot, or not at all.
	blocker := startCall(a, list)
	if err := blocker.intercept(list, &droverv1.ListNodesRequest{}, ok); err != nil {
		t.Fatal(err)
	}
	timedOut := startCall(a, list)
	wantRefused(t, "answer of a wait that ended while operators are full", timedOut.intercept(list, req, ok))
	timedOut.end()
	blocker.end()

	// A read refused for want of a slot fails the query.
	blocker = startCall(a, list)
	if err := blocker.intercept(list, &droverv1.ListNodesRequest{}, ok); err != nil {
		t.Fatal(err)
	}
	woken := startCall(a, list)
	err = woken.intercept(list, req, func(ctx context.Context, _ any) (any, error) {
		_, err := heldWhileReading(ctx, 10, func(*state.Snapshot) (uint64, error) { return 11, nil })(nil)
		return nil, err
	})
	wantRefused(t, "read while operators are full", err)
	woken.end()
	blocker.end()
	if n := a.list.inFlight.Load(); n != 0 {
		t.Errorf("%d operator calls in flight after every call ended, want 0", n)
	}
}
