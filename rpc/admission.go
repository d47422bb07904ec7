package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/fsm/state"
)

// gate bounds the calls of one class in flight. A call that finds it full
// is refused, never queued: a queue of operator reads is what starves raft.
type gate struct {
	class    callClass
	max      int64
	inFlight atomic.Int64
	refused  atomic.Uint64
}

// tryTake takes a slot if one is free.
func (g *gate) tryTake() bool {
	for {
		n := g.inFlight.Load()
		if n >= g.max {
			g.refused.Add(1)
			return false
		}
		if g.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (g *gate) release() { g.inFlight.Add(-1) }

// admission holds unary calls to the bound of their class. A call takes
// its slot when it starts to work and holds it until its answer has been
// handed to the transport (the stats handler's End), so that encoding a
// large answer counts too. A blocking query (min_index > 0) holds a slot
// only while it reads the state and once its answer is final; it gives the
// slot back while it waits for a change, which costs no CPU.
//
// go-grpc-middleware's ratelimit interceptor does not fit: it limits a
// rate, not calls in flight, has no release, and replaces the error with
// one that carries no RetryInfo.
type admission struct {
	agent, list, operator gate
	logger                *slog.Logger
	// logRefusal keeps the log to a line per interval under a flood; the
	// counters have every refusal.
	logRefusal rate.Sometimes
}

func newAdmission(l Limits, logger *slog.Logger) *admission {
	a := &admission{logger: logger, logRefusal: rate.Sometimes{Interval: 10 * time.Second}}
	a.agent.class, a.agent.max = classAgent, int64(l.MaxAgentCalls)
	a.list.class, a.list.max = classList, int64(l.MaxListCalls)
	a.operator.class, a.operator.max = classOperator, int64(l.MaxOperatorCalls)
	return a
}

// gateOf is the gate of a class, nil for the unbounded server class.
func (a *admission) gateOf(c callClass) *gate {
	switch c {
	case classAgent:
		return &a.agent
	case classList:
		return &a.list
	case classOperator:
		return &a.operator
	}
	return nil
}

// call is one bounded call's hold on its gate. The stats handler puts it
// in the call's context; the interceptor and the blocking query take and
// drop the slot; the stats handler's End drops it.
type call struct {
	a      *admission
	gate   *gate
	method string
	held   atomic.Bool
}

type callKey struct{}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// take holds a slot unless the call holds one; it fails RESOURCE_EXHAUSTED
// with a retry hint when the class is full.
func (c *call) take() error {
	if c.held.Load() {
		return nil
	}
	if !c.gate.tryTake() {
		return c.a.refuse(c.gate, c.method)
	}
	c.held.Store(true)
	return nil
}

// drop gives the slot back if the call holds one.
func (c *call) drop() {
	if c.held.CompareAndSwap(true, false) {
		c.gate.release()
	}
}

// refuse is the answer to a call its class has no slot for.
func (a *admission) refuse(g *gate, method string) error {
	a.logRefusal.Do(func() {
		a.logger.Warn("refusing calls: too many in flight", "class", g.class.String(), "limit", g.max,
			"method", method, "refused_agent_calls", a.agent.refused.Load(), "refused_list_calls", a.list.refused.Load(),
			"refused_operator_calls", a.operator.refused.Load())
	})
	return resourceExhausted(fmt.Sprintf("server busy: %d %s calls in flight, the most it takes; retry later", g.max, g.class))
}

// resourceExhausted is RESOURCE_EXHAUSTED with a RetryInfo detail, so
// clients back off instead of retrying at once.
func resourceExhausted(msg string) error {
	st, err := status.New(codes.ResourceExhausted, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
	if err != nil {
		return status.Error(codes.ResourceExhausted, msg)
	}
	return st.Err()
}

// unary is the interceptor. It must run before the forwarder, so that a
// follower bounds the calls it passes on as well as those it answers.
func (a *admission) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c := callOf(ctx)
	if c == nil {
		return handler(ctx, req)
	}
	if !blockingQuery(req) {
		if err := c.take(); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	resp, err := handler(ctx, req)
	if err != nil {
		return nil, err
	}
	// The answer is final: encoding it counts, whether it was read here
	// (and the slot already held), by the leader, or before a wait that
	// ended without a change.
	if err := c.take(); err != nil {
		return nil, err
	}
	return resp, nil
}

// heldWhileReading wraps a blocking query's read so that the call holds a
// slot of its class while it reads, keeps it when the read is the answer,
// and gives it back when the query is about to wait for an index past
// minIndex.
func heldWhileReading(ctx context.Context, minIndex uint64, read func(*state.Snapshot) (uint64, error)) func(*state.Snapshot) (uint64, error) {
	c := callOf(ctx)
	if c == nil || minIndex == 0 {
		return read
	}
	return func(snap *state.Snapshot) (uint64, error) {
		if err := c.take(); err != nil {
			return 0, err
		}
		index, err := read(snap)
		if err == nil && index <= minIndex {
			c.drop()
		}
		return index, err
	}
}

// TagRPC implements stats.Handler: it gives every call of a bounded class
// its hold.
func (a *admission) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	g := a.gateOf(classOf(info.FullMethodName))
	if g == nil {
		return ctx
	}
	return context.WithValue(ctx, callKey{}, &call{a: a, gate: g, method: info.FullMethodName})
}

// HandleRPC implements stats.Handler: the call's end gives its slot back.
func (a *admission) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.End); !ok {
		return
	}
	if c := callOf(ctx); c != nil {
		c.drop()
	}
}

// TagConn implements stats.Handler.
func (a *admission) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn implements stats.Handler.
func (a *admission) HandleConn(context.Context, stats.ConnStats) {}
