package rpc_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server"
)

// limited sets the server's limits: f changes the defaults.
func limited(f func(*rpc.Limits)) func(*server.Config) {
	return func(c *server.Config) { f(&c.Limits) }
}

// hasRetryInfo reports whether err carries a positive RetryInfo hint.
func hasRetryInfo(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			return true
		}
	}
	return false
}

// TestOperatorFloodRefusedHeartbeatsServed floods a real server that takes
// one operator call at a time with whole-fleet Node.List calls from 32
// connections, while a node heartbeats. Lists beyond the bound must be
// refused RESOURCE_EXHAUSTED with a retry hint, never fail otherwise, and
// every heartbeat must succeed. The flood goes on until it has seen 20
// refusals and 20 heartbeats, a call fails, or a minute has passed.
func TestOperatorFloodRefusedHeartbeatsServed(t *testing.T) {
	e := newEnv(t, limited(func(l *rpc.Limits) { l.MaxListCalls = 1 }))
	registerNodes(t, e, 2000)
	agent := e.register()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var refused, heartbeats, answered atomic.Int64
	enough := func() bool { return refused.Load() >= 20 && heartbeats.Load() >= 20 }
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 32 {
		client := droverv1.NewNodeServiceClient(testserver.Dial(t, e.srv.RPCAddr()))
		wg.Go(func() {
			for !enough() && ctx.Err() == nil {
				_, err := client.List(ctx, &droverv1.ListNodesRequest{Page: &droverv1.PageOptions{PageSize: 5000}})
				switch {
				case err == nil:
					answered.Add(1)
				case status.Code(err) == codes.ResourceExhausted && hasRetryInfo(err):
					refused.Add(1)
				case ctx.Err() == nil:
					errs <- err
					cancel()
					return
				}
			}
		})
	}
	wg.Go(func() {
		for !enough() && ctx.Err() == nil {
			_, err := e.nodes.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{
				NodeId: agent.GetId(), SecretId: agent.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY,
			})
			if err != nil {
				errs <- fmt.Errorf("heartbeat: %w", err)
				cancel()
				return
			}
			heartbeats.Add(1)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call failed during the flood (code %s): %v", status.Code(err), err)
	}
	t.Logf("flood: %d lists answered, %d refused; %d heartbeats", answered.Load(), refused.Load(), heartbeats.Load())
	if !enough() {
		t.Fatalf("flood ended with %d refusals and %d heartbeats, want 20 of each", refused.Load(), heartbeats.Load())
	}
	st := e.srv.LimitStats()
	if st.RefusedListCalls != uint64(refused.Load()) || st.RefusedAgentCalls != 0 {
		t.Errorf("server counted %d operator and %d agent calls refused; the clients saw %d lists refused",
			st.RefusedListCalls, st.RefusedAgentCalls, refused.Load())
	}
}

// TestBlockingQueryHoldsNoOperatorSlot parks a blocking Node.List on a
// server that takes one operator call at a time: while it waits, another
// operator call is answered; a change wakes it with its answer.
func TestBlockingQueryHoldsNoOperatorSlot(t *testing.T) {
	e := newEnv(t, limited(func(l *rpc.Limits) { l.MaxListCalls = 1 }))
	e.register()
	index := e.latestIndex()
	type answer struct {
		resp *droverv1.ListNodesResponse
		err  error
	}
	woken := make(chan answer, 1)
	go func() {
		resp, err := e.nodes.List(e.ctx(), &droverv1.ListNodesRequest{Query: &droverv1.QueryOptions{MinIndex: index, MaxWait: durationpb.New(time.Minute)}})
		woken <- answer{resp, err}
	}()
	waitBlocked(t, e, 1)
	if _, err := e.jobs.List(e.ctx(), &droverv1.ListJobsRequest{}); err != nil {
		t.Fatalf("operator call while a blocking query waits: %v", err)
	}
	e.register()
	a := <-woken
	if a.err != nil {
		t.Fatalf("blocking query: %v", a.err)
	}
	if got := len(a.resp.GetNodes()); got != 2 || a.resp.GetMeta().GetIndex() <= index {
		t.Errorf("blocking query answered %d nodes at index %d, want 2 past %d", got, a.resp.GetMeta().GetIndex(), index)
	}
}

// TestConnectionsPerAddress runs a real server that takes two connections
// per address. Two from 127.0.0.2 are served; a third is closed (its call
// fails UNAVAILABLE); 127.0.0.1 still gets through; once one of the two is
// closed, a new connection from 127.0.0.2 is served.
func TestConnectionsPerAddress(t *testing.T) {
	e := newEnv(t, limited(func(l *rpc.Limits) { l.MaxConnsPerIP = 2 }))
	info := func(conn *grpc.ClientConn) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := droverv1.NewClusterServiceClient(conn).Info(ctx, &droverv1.ServerInfoRequest{})
		return err
	}
	c1, c2 := dialFrom(t, e, "127.0.0.2"), dialFrom(t, e, "127.0.0.2")
	for i, c := range []*grpc.ClientConn{c1, c2} {
		if err := info(c); err != nil {
			t.Fatalf("connection %d from 127.0.0.2: %v", i+1, err)
		}
	}
	before := e.srv.LimitStats()
	if err := info(dialFrom(t, e, "127.0.0.2")); status.Code(err) != codes.Unavailable {
		t.Fatalf("third connection from 127.0.0.2: %v (code %s), want Unavailable", err, status.Code(err))
	}
	if after := e.srv.LimitStats(); after.RefusedConnections <= before.RefusedConnections {
		t.Errorf("refused connections %d, then %d: the third was not counted", before.RefusedConnections, after.RefusedConnections)
	}
	if err := info(e.srv.Conn); err != nil {
		t.Fatalf("connection from 127.0.0.1: %v", err)
	}

	open := e.srv.LimitStats().Connections
	_ = c1.Close()
	deadline := time.Now().Add(10 * time.Second)
	for e.srv.LimitStats().Connections >= open {
		if time.Now().After(deadline) {
			t.Fatalf("the server still counts %d connections after one closed", e.srv.LimitStats().Connections)
		}
		time.Sleep(time.Millisecond)
	}
	if err := info(dialFrom(t, e, "127.0.0.2")); err != nil {
		t.Fatalf("new connection from 127.0.0.2 after one closed: %v", err)
	}
}

// dialFrom connects to the server from a local address of the loopback
// network, closed when the test ends.
func dialFrom(t *testing.T, e *env, local string) *grpc.ClientConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := grpc.NewClient(e.srv.RPCAddr(), append(rpc.ClientDialOptions(nil),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
