package simagent

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/droverhq/drover/internal/backoff"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Agent is one simulated node's agent: it registers the node, heartbeats
// at the TTL the servers hand out and, unless the fleet is heartbeat-only,
// runs the node's allocations (run.go). Its work runs as tasks on the
// fleet's schedule; only its GetAllocs long poll has a goroutine of its own.
type Agent struct {
	f    *Fleet
	node Node
	// conn picks which of a server's connections the agent uses.
	conn int
	// server is the position of the agent's current server in the fleet's
	// address list; it moves on when a call fails there.
	server atomic.Uint32
	slots  [numTaskKinds]slot
	// retries paces the retries of each task kind after failed calls (nil
	// until the kind's first failure). Tasks of one kind never run at
	// once, and the schedule's lock orders their runs.
	retries [numTaskKinds]*backoff.Backoff

	// status is the droverv1.NodeStatus the servers last told the agent.
	status atomic.Int32
	// lastOK is when the last heartbeat the servers accepted was sent
	// (unix nanoseconds).
	lastOK atomic.Int64
	// polling is set once the GetAllocs loop runs. rushed is set while
	// the node is initializing once a report has brought the next
	// heartbeat forward, so that this happens once per spell.
	polling atomic.Bool
	rushed  atomic.Bool
	// fresh is set by a registration until the heartbeat after it.
	fresh atomic.Bool

	// allocs is nil for heartbeat-only agents.
	allocs *allocSet
	// fault is nil unless the agent is flaky (faults.go).
	fault *faultState
}

// newAgent prepares the agent of node n, number i of the fleet, of which
// flaky nodes are flaky.
func newAgent(f *Fleet, n Node, i, flaky int) *Agent {
	// Agents spread over the servers first, then over each server's
	// connections.
	servers := len(f.cfg.Servers)
	a := &Agent{f: f, node: n, conn: i / servers}
	a.server.Store(uint32(i % servers))
	for k := range a.slots {
		a.slots[k] = slot{agent: a, kind: taskKind(k), index: -1}
	}
	if !f.cfg.HeartbeatOnly {
		a.allocs = newAllocSet(int64(f.cfg.StartDelay), int64(f.cfg.BatchRunTime), f.cfg.FailureRate, int64(f.cfg.HealthDelay))
	}
	if rank, ok := f.cfg.Faults.Flaky(i); ok {
		a.fault = newFaultState(f.cfg.Faults, rank, flaky)
	}
	return a
}

// Node returns the node the agent simulates.
func (a *Agent) Node() Node { return a.node }

// Status returns the node status the servers last told the agent.
func (a *Agent) Status() droverv1.NodeStatus { return droverv1.NodeStatus(a.status.Load()) }

// schedule asks for a task of the agent to run at due, or earlier.
func (a *Agent) schedule(kind taskKind, due int64) { a.f.sched.at(&a.slots[kind], due) }

// client returns a client on the agent's current server, and the server's
// position for moveOn.
func (a *Agent) client() (droverv1.NodeServiceClient, uint32) {
	srv := a.server.Load()
	_, conn := a.f.pool.conn(srv, a.conn)
	return droverv1.NewNodeServiceClient(conn), srv
}

// moveOn moves the agent from server srv to the next one if err says the
// server cannot serve it, unless another call has moved it already.
func (a *Agent) moveOn(srv uint32, err error) {
	if remedyFor(err) == elsewhere && a.server.CompareAndSwap(srv, srv+1) {
		a.f.stats.failovers.Add(1)
	}
}

// retryAt handles a failed call of a task made on server srv and returns
// when the task is to run again.
func (a *Agent) retryAt(kind taskKind, srv uint32, err error) int64 {
	a.f.stats.failed(err)
	a.moveOn(srv, err)
	if a.retries[kind] == nil {
		a.retries[kind] = a.f.cfg.retryPolicy().New()
	}
	d := a.retries[kind].Next(retryHint(err))
	if remedyFor(err) == sameServer {
		a.f.cfg.Logger.Warn("simulated agent call refused", "node", a.node.ID, "err", err)
		d = a.f.cfg.RetryMax // back off fully: retrying cannot help soon
	}
	return time.Now().Add(d).UnixNano()
}

// succeeded ends the backoff of a task kind after a call that worked.
func (a *Agent) succeeded(kind taskKind) {
	if b := a.retries[kind]; b != nil {
		b.Reset()
	}
}

// register sends Node.Register, then heartbeats at once (a new node
// becomes ready on its first heartbeat) and starts the GetAllocs loop.
func (a *Agent) register(ctx context.Context) (int64, bool) {
	client, srv := a.client()
	cctx, cancel := context.WithTimeout(ctx, a.f.cfg.CallTimeout)
	resp, err := client.Register(cctx, &droverv1.RegisterNodeRequest{Node: a.node.Proto()})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, false
		}
		a.f.stats.registerFailures.Add(1)
		return a.retryAt(taskRegister, srv, err), true
	}
	a.succeeded(taskRegister)
	a.registered(resp)
	a.schedule(taskHeartbeat, time.Now().UnixNano())
	a.startPolling()
	return 0, false
}

// registered takes in the servers' answer to a registration.
func (a *Agent) registered(resp *droverv1.RegisterNodeResponse) {
	a.f.stats.registrations.Add(1)
	a.f.pool.learn(resp.GetServers())
	a.status.Store(int32(resp.GetStatus()))
	a.fresh.Store(true)
}

// heartbeat sends Node.UpdateStatus and schedules the next one at a random
// 50-90% (by default) of the TTL the servers answer with, counted from when
// this one was sent.
func (a *Agent) heartbeat(ctx context.Context) (int64, bool) {
	sent := time.Now()
	a.f.stats.heartbeatsSent.Add(1)
	client, srv := a.client()
	cctx, cancel := context.WithTimeout(ctx, a.f.cfg.CallTimeout)
	resp, err := client.UpdateStatus(cctx, &droverv1.UpdateNodeStatusRequest{
		NodeId: a.node.ID, SecretId: a.node.Secret, Status: droverv1.NodeStatus_NODE_STATUS_READY,
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, false
		}
		a.f.stats.heartbeatsFailed.Add(1)
		if remedyFor(err) == reregister {
			// Collected by the servers: start over. Registration
			// schedules the heartbeats again.
			a.status.Store(int32(droverv1.NodeStatus_NODE_STATUS_UNSPECIFIED))
			a.schedule(taskRegister, time.Now().UnixNano())
			return 0, false
		}
		return a.retryAt(taskHeartbeat, srv, err), true
	}
	a.succeeded(taskHeartbeat)
	return a.beatAccepted(sent, resp), true
}

// beatAccepted takes in the servers' answer to a heartbeat sent at sent,
// and returns when to send the next.
func (a *Agent) beatAccepted(sent time.Time, resp *droverv1.UpdateNodeStatusResponse) int64 {
	a.f.stats.heartbeatsOK.Add(1)
	a.lastOK.Store(sent.UnixNano())
	a.f.pool.learn(resp.GetServers())
	a.status.Store(int32(resp.GetStatus()))
	a.afterHeartbeat(resp.GetStatus())
	return a.nextHeartbeat(sent, resp.GetHeartbeatTtl().AsDuration())
}

// nextHeartbeat picks when to heartbeat within ttl of sent: early enough
// that the servers' grace period is never needed, spread so that nodes that
// started together drift apart. The leader reset the node's timer somewhere
// between sent and the answer, so the TTL is counted from sent: counted
// from the answer, a slow answer (a busy server) would push the next
// heartbeat past the timer by the time the answer took.
func (a *Agent) nextHeartbeat(sent time.Time, ttl time.Duration) int64 {
	if ttl <= 0 {
		ttl = a.f.cfg.RetryMax
	}
	lo, hi := a.f.cfg.HeartbeatMin, a.f.cfg.HeartbeatMax
	frac := lo + rand.Float64()*(hi-lo)
	if a.fresh.CompareAndSwap(true, false) && a.f.cfg.SpreadHeartbeats {
		frac *= rand.Float64()
	}
	return sent.Add(time.Duration(frac * float64(ttl))).UnixNano()
}

// HeartbeatedSince reports whether the servers accepted a heartbeat of the
// agent that was sent at or after t.
func (a *Agent) HeartbeatedSince(t time.Time) bool { return a.lastOK.Load() >= t.UnixNano() }
