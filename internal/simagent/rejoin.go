package simagent

import (
	"context"
	"math/rand/v2"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// This file is the part of a flaky agent (Config.Faults) that goes silent
// and comes back.

// callCtx returns the context the agent's calls run under: ctx, or for a
// flaky agent its spell online, false while it is silent.
func (a *Agent) callCtx(ctx context.Context) (context.Context, bool) {
	if a.fault == nil {
		return ctx, true
	}
	return a.fault.current()
}

// toggle takes the agent offline, or brings it back, and returns when to
// toggle again. ctx is the fleet's.
func (a *Agent) toggle(ctx context.Context) (int64, bool) {
	faults := a.f.cfg.Faults
	now := time.Now()
	if !a.fault.isOffline() {
		a.fault.goOffline()
		a.f.stats.disconnects.Add(1)
		return now.Add(faults.Offline).UnixNano(), true
	}
	online := a.fault.goOnline(ctx)
	a.f.stats.returns.Add(1)
	a.rejoin(online)
	return now.Add(faults.Every - faults.Offline).UnixNano(), true
}

// rejoin starts what a returning agent sends. Normally that is a
// heartbeat, which leads to the rest (a registration if the servers
// collected the node, reports while it is initializing). With
// ReorderOnReturn it is a registration, a heartbeat and a report of every
// allocation the agent runs, each on its own after a random delay and
// retried until it succeeds; the GetAllocs loop resumes after a random
// delay of its own (pollCtx).
func (a *Agent) rejoin(ctx context.Context) {
	if !a.f.cfg.Faults.ReorderOnReturn {
		a.schedule(taskHeartbeat, time.Now().UnixNano())
		return
	}
	calls := []rejoinCall{a.rejoinRegister, a.rejoinHeartbeat}
	if a.allocs != nil {
		a.allocs.resync()
		calls = append(calls, a.rejoinReport)
	}
	for _, call := range calls {
		a.f.rejoins.Go(func() { a.retryUntilDone(ctx, call) })
	}
}

// rejoinCall is one call a returning agent makes.
type rejoinCall func(ctx context.Context, client droverv1.NodeServiceClient) error

// retryUntilDone makes call after a random delay, and again after a
// backoff until it succeeds or ctx (the spell online) ends.
func (a *Agent) retryUntilDone(ctx context.Context, call rejoinCall) {
	if !pause(ctx, a.reorderDelay()) {
		return
	}
	retry := a.f.cfg.retryPolicy().New()
	for {
		client, srv := a.client()
		err := call(ctx, client)
		if err == nil || ctx.Err() != nil {
			return
		}
		a.moveOn(srv, err)
		if !pause(ctx, retry.Next(retryHint(err))) {
			return
		}
	}
}

// reorderDelay is a random delay of up to Faults.ReorderSpread.
func (a *Agent) reorderDelay() time.Duration {
	return rand.N(a.f.cfg.Faults.ReorderSpread + 1)
}

func (a *Agent) rejoinRegister(ctx context.Context, client droverv1.NodeServiceClient) error {
	cctx, cancel := context.WithTimeout(ctx, a.f.cfg.CallTimeout)
	defer cancel()
	resp, err := client.Register(cctx, &droverv1.RegisterNodeRequest{Node: a.node.Proto()})
	if err != nil {
		a.f.stats.registerFailures.Add(1)
		return err
	}
	a.registered(resp)
	a.startPolling()
	return nil
}

func (a *Agent) rejoinHeartbeat(ctx context.Context, client droverv1.NodeServiceClient) error {
	cctx, cancel := context.WithTimeout(ctx, a.f.cfg.CallTimeout)
	defer cancel()
	sent := time.Now()
	a.f.stats.heartbeatsSent.Add(1)
	resp, err := client.UpdateStatus(cctx, &droverv1.UpdateNodeStatusRequest{
		NodeId: a.node.ID, SecretId: a.node.Secret, Status: droverv1.NodeStatus_NODE_STATUS_READY,
	})
	if err != nil {
		a.f.stats.heartbeatsFailed.Add(1)
		return err
	}
	// The regular heartbeats take over from here.
	a.schedule(taskHeartbeat, a.beatAccepted(sent, resp))
	return nil
}

// rejoinReport reports what the agent runs. The servers refuse it until
// the node has heartbeated (FailedPrecondition); that is retried too.
func (a *Agent) rejoinReport(ctx context.Context, client droverv1.NodeServiceClient) error {
	updates := a.allocs.reports()
	if len(updates) == 0 {
		return nil
	}
	resp, err := a.updateAlloc(ctx, client, updates)
	if err != nil {
		a.f.stats.reportFailures.Add(1)
		if remedyFor(err) == heartbeatFirst {
			a.f.stats.reportsRefused.Add(1)
		}
		return err
	}
	a.reportAccepted(updates, resp)
	return nil
}
