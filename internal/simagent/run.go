package simagent

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// This file is the part of an agent that runs allocations: the GetAllocs
// long poll, the simulated passage of time, and the reports.

// startPolling starts the GetAllocs loop once, for agents that run
// allocations, under the fleet's context. It is called from a task or from
// a rejoin goroutine; the fleet's Stop waits for the tasks, then for the
// rejoins, and only then for the polls, so it cannot miss one.
func (a *Agent) startPolling() {
	if a.allocs == nil || !a.polling.CompareAndSwap(false, true) {
		return
	}
	a.f.polls.Go(func() { a.poll(a.f.ctx) })
}

// poll long-polls the node's allocations until ctx ends, merging every
// answer and scheduling the reports and transitions it calls for. While
// a flaky agent is silent its poll is cancelled and waits for the return.
func (a *Agent) poll(ctx context.Context) {
	var index uint64
	retry := a.f.cfg.retryPolicy().New()
	for ctx.Err() == nil {
		cctx, ok := a.pollCtx(ctx)
		if !ok {
			return
		}
		client, srv := a.client()
		resp, err := a.getAllocs(cctx, client, index)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if cctx.Err() != nil {
				continue // gone silent
			}
			a.f.stats.pollFailures.Add(1)
			a.moveOn(srv, err)
			if !pause(cctx, retry.Next(retryHint(err))) && ctx.Err() != nil {
				return
			}
			continue
		}
		retry.Reset()
		a.f.stats.polls.Add(1)
		now := time.Now().UnixNano()
		a.observeChanges(resp, index, now)
		// A lagging server answers only once it has passed index, so the
		// agent never goes back in time.
		index = max(index, resp.GetIndex())
		a.follow(a.allocs.apply(resp, now), now)
	}
}

// pollCtx returns the context of the next GetAllocs: ctx, or for a flaky
// agent the context of its current spell online, waiting while it is
// silent (and, with ReorderOnReturn, a random moment after it returns).
func (a *Agent) pollCtx(ctx context.Context) (context.Context, bool) {
	if a.fault == nil {
		return ctx, true
	}
	online, waited, ok := a.fault.await(ctx)
	if ok && waited && a.f.cfg.Faults.ReorderOnReturn {
		pause(online, a.reorderDelay())
	}
	return online, ok
}

// getAllocs makes one GetAllocs call from index.
func (a *Agent) getAllocs(ctx context.Context, client droverv1.NodeServiceClient, index uint64) (*droverv1.GetAllocsResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, a.f.cfg.PollWait+a.f.cfg.CallTimeout)
	defer cancel()
	known, count := a.allocs.known()
	return client.GetAllocs(cctx, &droverv1.GetAllocsRequest{
		NodeId: a.node.ID, SecretId: a.node.Secret, MinIndex: index, MaxWait: durationpb.New(a.f.cfg.PollWait),
		KnownIndex: known, KnownCount: count,
	})
}

// observeChanges records, for every allocation the servers changed after
// index, how long their change took to reach the agent (now). Only
// server-side changes count (alloc_modify_index): the agent's own reports
// move modify_index too but never wake its poll, so counting them would
// measure the time until the next unrelated wake-up. modify_time is that of
// the last change of any kind, so a report made after the server's change
// shortens the figure; agents report only what they have received, so
// that is rare.
func (a *Agent) observeChanges(resp *droverv1.GetAllocsResponse, index uint64, now int64) {
	for _, al := range resp.GetAllocs() {
		if al.GetAllocModifyIndex() > index && al.GetModifyTime() > 0 {
			a.f.stats.getAllocsLatency.Observe(time.Duration(now - al.GetModifyTime()))
		}
	}
}

// follow schedules what a change of the allocations calls for.
func (a *Agent) follow(c change, now int64) {
	if c.dirty {
		a.schedule(taskReport, now)
	}
	if c.next != 0 {
		a.schedule(taskAdvance, c.next)
	}
}

// advance moves allocations on whose time has come.
func (a *Agent) advance(context.Context) (int64, bool) {
	now := time.Now().UnixNano()
	c := a.allocs.advance(now)
	if c.dirty {
		a.schedule(taskReport, now)
	}
	return c.next, c.next != 0
}

// report sends every unacknowledged change in one Node.UpdateAlloc. A
// report refused because the node is down or disconnected waits for a
// heartbeat, which schedules it again.
func (a *Agent) report(ctx context.Context) (int64, bool) {
	updates := a.allocs.reports()
	if len(updates) == 0 {
		return 0, false
	}
	client, srv := a.client()
	resp, err := a.updateAlloc(ctx, client, updates)
	if err != nil {
		if ctx.Err() != nil {
			return 0, false
		}
		a.f.stats.reportFailures.Add(1)
		switch remedyFor(err) {
		case heartbeatFirst:
			a.f.stats.reportsRefused.Add(1)
			a.schedule(taskHeartbeat, time.Now().UnixNano())
			return 0, false
		case reregister:
			// The heartbeat finds out and registers the node again.
			a.schedule(taskHeartbeat, time.Now().UnixNano())
			return 0, false
		}
		return a.retryAt(taskReport, srv, err), true
	}
	a.succeeded(taskReport)
	more := a.reportAccepted(updates, resp)
	return time.Now().UnixNano(), more
}

// reportAccepted takes in the servers' answer to a report of updates and
// returns whether changes remain to be sent.
func (a *Agent) reportAccepted(updates []*droverv1.AllocClientUpdate, resp *droverv1.UpdateAllocResponse) bool {
	a.f.stats.reportCalls.Add(1)
	a.f.stats.allocReports.Add(uint64(len(updates)))
	more := a.allocs.acked(updates, resp.GetIndex(), resp.GetUnknownAllocIds())
	if a.Status() == droverv1.NodeStatus_NODE_STATUS_INITIALIZING && a.rushed.CompareAndSwap(false, true) {
		// The report is what the servers waited for to admit the node.
		a.schedule(taskHeartbeat, time.Now().UnixNano())
	}
	return more
}

// updateAlloc makes one Node.UpdateAlloc call of updates, timing it when
// it is answered.
func (a *Agent) updateAlloc(ctx context.Context, client droverv1.NodeServiceClient, updates []*droverv1.AllocClientUpdate) (*droverv1.UpdateAllocResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, a.f.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	resp, err := client.UpdateAlloc(cctx, &droverv1.UpdateAllocRequest{NodeId: a.node.ID, SecretId: a.node.Secret, Allocs: updates})
	if err == nil {
		a.f.stats.updateAllocLatency.Observe(time.Since(start))
	}
	return resp, err
}

// afterHeartbeat re-sends every allocation's status while the node is
// initializing (it came back from down or disconnected, and the servers
// admit it only after a report), and sends reports held back until the
// node heartbeated.
func (a *Agent) afterHeartbeat(status droverv1.NodeStatus) {
	if a.allocs == nil {
		return
	}
	switch status {
	case droverv1.NodeStatus_NODE_STATUS_READY:
		a.rushed.Store(false)
	case droverv1.NodeStatus_NODE_STATUS_INITIALIZING:
		a.allocs.resync()
	}
	if a.allocs.hasReports() {
		a.schedule(taskReport, time.Now().UnixNano())
	}
}

// pause waits for d or until ctx ends; it reports whether ctx is still
// live. It is a backoff, not a synchronisation.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
