package rpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// fakeLeader is a leader on loopback that records the reports it is
// sent. Each batch waits for the test to release it; its answer echoes,
// per call, the node id (as the unknown allocation), or refuses nodes
// named "deny".
type fakeLeader struct {
	droverv1.UnimplementedClusterServiceServer
	droverv1.UnimplementedNodeServiceServer
	addr string
	// batches, when set, takes batches; otherwise they are UNIMPLEMENTED,
	// as on a release that does not know them.
	batches bool

	received chan []*droverv1.ForwardedAllocReport
	release  chan struct{}

	mu     sync.Mutex
	alone  []string // node ids of calls forwarded one by one
	offers int      // batches offered, taken or not
}

func startFakeLeader(t *testing.T, batches bool) *fakeLeader {
	t.Helper()
	l := &fakeLeader{batches: batches, received: make(chan []*droverv1.ForwardedAllocReport, 16), release: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(Codec{}))
	droverv1.RegisterClusterServiceServer(gs, l)
	droverv1.RegisterNodeServiceServer(gs, l)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	l.addr = lis.Addr().String()
	return l
}

func (l *fakeLeader) ForwardAllocReports(ctx context.Context, req *droverv1.ForwardAllocReportsRequest) (*droverv1.ForwardAllocReportsResponse, error) {
	l.mu.Lock()
	l.offers++
	l.mu.Unlock()
	if !l.batches {
		return nil, status.Error(codes.Unimplemented, "unknown method ForwardAllocReports")
	}
	l.received <- req.GetReports()
	select {
	case <-l.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := &droverv1.ForwardAllocReportsResponse{}
	for _, r := range req.GetReports() {
		id := r.GetRequest().GetNodeId()
		if id == "deny" {
			out.Outcomes = append(out.Outcomes, reportOutcome(nil, status.Error(codes.PermissionDenied, "wrong secret")))
			continue
		}
		out.Outcomes = append(out.Outcomes, reportOutcome(&droverv1.UpdateAllocResponse{Index: 7, UnknownAllocIds: []string{id}}, nil))
	}
	return out, nil
}

func (l *fakeLeader) UpdateAlloc(_ context.Context, req *droverv1.UpdateAllocRequest) (*droverv1.UpdateAllocResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.alone = append(l.alone, req.GetNodeId())
	return &droverv1.UpdateAllocResponse{Index: 9, UnknownAllocIds: []string{req.GetNodeId()}}, nil
}

// counts returns the calls forwarded alone and the batches offered.
func (l *fakeLeader) counts() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.alone), l.offers
}

// fixedLeader is a Cluster whose leader is another server that never
// changes.
type fixedLeader struct {
	Cluster
	leader Leader
}

func (c fixedLeader) Leader() Leader                 { return c.leader }
func (c fixedLeader) LeaderChanged() <-chan struct{} { return nil }

func forwarderTo(t *testing.T, leader Leader) *forwarder {
	t.Helper()
	stopping := make(chan struct{})
	f := newForwarder(fixedLeader{leader: leader}, func() time.Duration { return 0 }, slog.New(slog.DiscardHandler), time.Second, nil, stopping)
	t.Cleanup(func() { close(stopping); f.close() })
	return f
}

func report(nodeID string) *droverv1.UpdateAllocRequest {
	return &droverv1.UpdateAllocRequest{NodeId: nodeID, Allocs: []*droverv1.AllocClientUpdate{{AllocId: "a-" + nodeID}}}
}

type forwarded struct {
	node string
	resp *droverv1.UpdateAllocResponse
	err  error
}

func forwardAsync(ctx context.Context, f *forwarder, leader Leader, nodeID string, out chan<- forwarded) {
	go func() {
		resp, err := f.forwardCall(ctx, nil, leader, droverv1.NodeService_UpdateAlloc_FullMethodName, report(nodeID), 1)
		r, _ := resp.(*droverv1.UpdateAllocResponse)
		out <- forwarded{node: nodeID, resp: r, err: err}
	}()
}

// pendingReports waits until n calls wait for the next batch.
func pendingReports(t *testing.T, f *forwarder, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.reports.mu.Lock()
		b := f.reports.batches
		f.reports.mu.Unlock()
		got := b.Pending()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait for the next batch, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReportsForwardedInBatches(t *testing.T) {
	fl := startFakeLeader(t, true)
	leader := Leader{ID: "leader", RPCAddr: fl.addr}
	f := forwarderTo(t, leader)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out := make(chan forwarded, 8)

	forwardAsync(ctx, f, leader, "n0", out)
	first := <-fl.received
	if len(first) != 1 || first[0].GetRequest().GetNodeId() != "n0" {
		t.Fatalf("first batch %v, want n0's call alone", first)
	}
	if d, _ := ctx.Deadline(); first[0].GetDeadline() != d.UnixNano() {
		t.Errorf("forwarded deadline %d, want the caller's %d", first[0].GetDeadline(), d.UnixNano())
	}
	// Calls arriving while the first batch is in flight wait for the next.
	for _, id := range []string{"n1", "deny", "n3"} {
		forwardAsync(ctx, f, leader, id, out)
	}
	pendingReports(t, f, 3)
	fl.release <- struct{}{}
	second := <-fl.received
	var nodes []string
	for _, r := range second {
		nodes = append(nodes, r.GetRequest().GetNodeId())
	}
	slices.Sort(nodes)
	if want := []string{"deny", "n1", "n3"}; !slices.Equal(nodes, want) {
		t.Fatalf("second batch carries %v, want %v", nodes, want)
	}
	fl.release <- struct{}{}
	for range 4 {
		got := <-out
		if got.node == "deny" {
			if status.Code(got.err) != codes.PermissionDenied {
				t.Errorf("deny: %v, want PERMISSION_DENIED", got.err)
			}
			continue
		}
		if got.err != nil || !slices.Equal(got.resp.GetUnknownAllocIds(), []string{got.node}) {
			t.Errorf("%s was answered %v, %v; want its own answer", got.node, got.resp, got.err)
		}
	}
	if alone, _ := fl.counts(); len(alone) != 0 {
		t.Errorf("calls forwarded alone: %v", alone)
	}
}

func TestReportsForwardedAloneToOlderLeader(t *testing.T) {
	fl := startFakeLeader(t, false)
	leader := Leader{ID: "leader", RPCAddr: fl.addr}
	f := forwarderTo(t, leader)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, id := range []string{"n0", "n1"} {
		resp, err := f.forwardCall(ctx, nil, leader, droverv1.NodeService_UpdateAlloc_FullMethodName, report(id), 1)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if r := resp.(*droverv1.UpdateAllocResponse); !slices.Equal(r.GetUnknownAllocIds(), []string{id}) {
			t.Fatalf("%s answered %v", id, r)
		}
	}
	if alone, offers := fl.counts(); !slices.Equal(alone, []string{"n0", "n1"}) || offers != 1 {
		t.Fatalf("forwarded alone %v after %d batches offered; want both alone after one offer", alone, offers)
	}
}

func TestReportBatchForAFormerLeader(t *testing.T) {
	fl := startFakeLeader(t, true)
	f := forwarderTo(t, Leader{ID: "new", RPCAddr: fl.addr})
	_, _, err := f.reports.forward(t.Context(), Leader{ID: "old", RPCAddr: "127.0.0.1:1"}, report("n0"))
	if !errors.Is(err, errLeaderChanged) {
		t.Fatalf("batch for a former leader: %v, want errLeaderChanged", err)
	}
}

func TestBatchDeadline(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name      string
		deadlines []int64
		want      time.Time
	}{
		{"the latest caller's", []int64{now.Add(time.Second).UnixNano(), now.Add(3 * time.Second).UnixNano()}, now.Add(3 * time.Second)},
		{"a caller without a deadline", []int64{now.Add(time.Second).UnixNano(), 0}, now.Add(forwardedReportsTimeout)},
		{"a caller that waits longer than the bound", []int64{now.Add(time.Hour).UnixNano(), 0}, now.Add(time.Hour)},
	}
	for _, tc := range cases {
		var items []*droverv1.ForwardedAllocReport
		for _, d := range tc.deadlines {
			items = append(items, &droverv1.ForwardedAllocReport{Deadline: d})
		}
		if got := batchDeadline(items, now); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
