package test_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// reconnectAgent plays the agent of one node in the reconnect test, with
// each of its duties callable on its own so the test can order and
// interleave them: heartbeats at the TTL the servers hand out, and a
// runner that long-polls the node's allocations, "runs" the ones wanted
// running and reports stopped the ones wanted stopped. Loops run on
// goroutines of their own, started with goLoops or goLoop; a test stops
// them by ending their context and then calls wait, so that none outlives
// it.
type reconnectAgent struct {
	conn  grpc.ClientConnInterface
	node  *droverv1.Node
	loops sync.WaitGroup
}

// agentStopTimeout bounds how long an agent's loops may take to return
// once their context has ended: every call they make is bound to it.
const agentStopTimeout = 5 * time.Second

func (a *reconnectAgent) client() droverv1.NodeServiceClient {
	return droverv1.NewNodeServiceClient(a.conn)
}

// until calls f until it succeeds or ctx ends.
func until(ctx context.Context, f func(context.Context) error) error {
	for {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := f(callCtx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(retryPause):
		}
	}
}

// goLoop runs loop (heartbeatLoop, runLoop) on a goroutine of its own
// until ctx ends.
func (a *reconnectAgent) goLoop(ctx context.Context, loop func(context.Context)) {
	a.loops.Go(func() { loop(ctx) })
}

// goLoops runs the agent's heartbeat and allocation loops until ctx ends.
func (a *reconnectAgent) goLoops(ctx context.Context) {
	a.goLoop(ctx, a.heartbeatLoop)
	a.goLoop(ctx, a.runLoop)
}

// wait waits for the loops started so far, whose contexts must have ended,
// and fails if they have not all returned within agentStopTimeout.
func (a *reconnectAgent) wait() error {
	done := make(chan struct{})
	go func() {
		a.loops.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(agentStopTimeout):
		return fmt.Errorf("agent of node %s: loops still running %s after they were stopped", a.node.GetId(), agentStopTimeout)
	}
}

func (a *reconnectAgent) register(ctx context.Context) error {
	return until(ctx, func(ctx context.Context) error {
		_, err := a.client().Register(ctx, &droverv1.RegisterNodeRequest{Node: a.node})
		return err
	})
}

// heartbeatOnce sends one heartbeat, retried until answered, and returns
// the TTL handed out.
func (a *reconnectAgent) heartbeatOnce(ctx context.Context) (time.Duration, error) {
	var ttl time.Duration
	err := until(ctx, func(ctx context.Context) error {
		resp, err := a.client().UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{
			NodeId: a.node.GetId(), SecretId: a.node.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY,
		})
		ttl = resp.GetHeartbeatTtl().AsDuration()
		return err
	})
	return ttl, err
}

// heartbeatLoop heartbeats at half the TTL until ctx ends.
func (a *reconnectAgent) heartbeatLoop(ctx context.Context) {
	for {
		ttl, err := a.heartbeatOnce(ctx)
		if err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(ttl/2, 10*time.Millisecond)):
		}
	}
}

// report sends the node's allocation updates, retried until accepted: an
// agent back from a missed heartbeat is refused until it heartbeats.
func (a *reconnectAgent) report(ctx context.Context, updates []*droverv1.AllocClientUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	return until(ctx, func(ctx context.Context) error {
		_, err := a.client().UpdateAlloc(ctx, &droverv1.UpdateAllocRequest{
			NodeId: a.node.GetId(), SecretId: a.node.GetSecretId(), Allocs: updates,
		})
		return err
	})
}

// getAllocs fetches the node's allocations, blocking past minIndex.
func (a *reconnectAgent) getAllocs(ctx context.Context, minIndex uint64) (*droverv1.GetAllocsResponse, error) {
	var resp *droverv1.GetAllocsResponse
	err := until(ctx, func(callCtx context.Context) error {
		if minIndex > 0 {
			// A blocking call outlives callTimeout.
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
		}
		var err error
		resp, err = a.client().GetAllocs(callCtx, &droverv1.GetAllocsRequest{
			NodeId: a.node.GetId(), SecretId: a.node.GetSecretId(), MinIndex: minIndex, MaxWait: durationpb.New(2 * time.Second),
		})
		if status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil {
			return nil // nothing changed; ask again
		}
		return err
	})
	return resp, err
}

// runLoop runs what the servers hand the node until ctx ends.
func (a *reconnectAgent) runLoop(ctx context.Context) {
	var minIndex uint64
	for ctx.Err() == nil {
		resp, err := a.getAllocs(ctx, minIndex)
		if err != nil {
			return
		}
		if resp == nil {
			continue
		}
		if err := a.report(ctx, agentUpdates(resp.GetAllocs())); err != nil {
			return
		}
		minIndex = resp.GetIndex()
	}
}

// agentUpdates is what an agent reports for the allocations it is handed:
// those wanted running run, those wanted stopped have stopped. Nothing is
// reported where the servers already know it.
func agentUpdates(allocs []*droverv1.Allocation) []*droverv1.AllocClientUpdate {
	var out []*droverv1.AllocClientUpdate
	for _, al := range allocs {
		want := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
		if al.ServerTerminal() {
			want = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
		}
		if al.ClientTerminal() || al.GetClientStatus() == want {
			continue
		}
		out = append(out, &droverv1.AllocClientUpdate{AllocId: al.GetId(), ClientStatus: want})
	}
	return out
}
