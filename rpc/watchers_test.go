package rpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestTenThousandWatchers parks 10,000 GetAllocs long polls, one per node,
// then changes the allocations of a few nodes at a time. Every call must end
// exactly once: the watchers of changed nodes with the change, every other
// watcher only when the test cancels it.
func TestTenThousandWatchers(t *testing.T) {
	t.Parallel()
	const (
		watchers = 10_000
		conns    = 20
		perRound = 100
		rounds   = 2
	)
	e := newEnv(t)
	job := e.job(perRound)
	nodes := registerNodes(t, e, watchers)

	type result struct {
		node  int
		index uint64
		err   error
	}
	results := make(chan result, watchers)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clients := make([]droverv1.NodeServiceClient, conns)
	for i := range clients {
		clients[i] = droverv1.NewNodeServiceClient(testserver.Dial(t, e.srv.RPCAddr()))
	}
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			resp, err := clients[i%conns].GetAllocs(ctx, &droverv1.GetAllocsRequest{
				NodeId: n.GetId(), SecretId: n.GetSecretId(), MinIndex: 1, MaxWait: durationpb.New(5 * time.Minute),
			})
			results <- result{node: i, index: resp.GetIndex(), err: err}
		})
	}
	waitBlocked(t, e, watchers)
	if got := e.srv.AllocWatchers(); got != watchers {
		t.Errorf("GetAllocs watchers = %d, want %d", got, watchers)
	}

	woken := make(map[int]bool)
	for round := range rounds {
		// Place one allocation on each of perRound nodes, in one entry.
		entry := &droverv1.PlanResultEntry{AppliedAt: time.Now().UnixNano()}
		changed := make(map[int]bool)
		for k := range perRound {
			i := round*perRound*7 + k*7 // spread over the fleet
			changed[i] = true
			entry.Allocations = append(entry.Allocations, mock.Alloc(nodes[i], job, k))
		}
		index := e.apply(droverv1.MessageTypePlanResult, entry)
		for range perRound {
			select {
			case r := <-results:
				if r.err != nil || !changed[r.node] || r.index != index {
					t.Fatalf("round %d: watcher of node %d returned index %d (err %v); want only the %d changed nodes at %d",
						round, r.node, r.index, r.err, perRound, index)
				}
				woken[r.node] = true
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: only %d of %d changed nodes' watchers returned", round, len(woken)-round*perRound, perRound)
			}
		}
		waitBlocked(t, e, int64(watchers-(round+1)*perRound))
	}

	cancel()
	wg.Wait()
	close(results)
	for r := range results {
		if status.Code(r.err) != codes.Canceled {
			t.Errorf("watcher of unchanged node %d ended with index %d, err %v; want canceled", r.node, r.index, r.err)
		}
		if woken[r.node] {
			t.Errorf("watcher of node %d returned twice", r.node)
		}
	}
}

// registerNodes registers n nodes through raft directly, many at a time,
// which is faster than through the API and just as real for the watchers.
func registerNodes(t *testing.T, e *env, n int) []*droverv1.Node {
	t.Helper()
	nodes := make([]*droverv1.Node, n)
	for i := range nodes {
		nodes[i] = mock.Node()
	}
	var wg sync.WaitGroup
	work := make(chan *droverv1.Node)
	for range 64 {
		wg.Go(func() {
			for node := range work {
				if _, _, err := e.srv.Apply(e.ctx(), droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{node.CloneVT()}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, node := range nodes {
		work <- node
	}
	close(work)
	wg.Wait()
	return nodes
}
