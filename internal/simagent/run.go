package simagent

import (
	"context"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// This file is the part of an agent that runs allocations: the GetAllocs
// long poll, the simulated passage of time, and the reports.

// startPolling starts the GetAllocs loop once, for agents that run
// allocations. It is called from a task, so the fleet's Stop (which waits
// for tasks before it waits for polls) cannot miss it.
func (a *Agent) startPolling(ctx context.Context) {
	if a.allocs == nil || !a.polling.CompareAndSwap(false, true) {
		return
	}
	a.f.polls.Go(func() { a.poll(ctx) })
}

// poll long-polls the node's allocations until ctx ends, merging every
// answer and scheduling the reports and transitions it calls for.
func (a *Agent) poll(ctx context.Context) {
	var index uint64
	failures := 0
	for ctx.Err() == nil {
		client, srv := a.client()
		cctx, cancel := context.WithTimeout(ctx, a.f.cfg.PollWait+a.f.cfg.CallTimeout)
		resp, err := client.GetAllocs(cctx, &droverv1.GetAllocsRequest{
			NodeId: a.node.ID, SecretId: a.node.Secret, MinIndex: index, MaxWait: int64(a.f.cfg.PollWait),
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.f.stats.pollFailures.Add(1)
			a.moveOn(srv, err)
			failures++
			if !pause(ctx, backoffDelay(failures, a.f.cfg.RetryMin, a.f.cfg.RetryMax, retryHint(err))) {
				return
			}
			continue
		}
		failures = 0
		a.f.stats.polls.Add(1)
		// A lagging server answers only once it has passed index, so the
		// agent never goes back in time.
		index = max(index, resp.GetIndex())
		now := time.Now().UnixNano()
		a.follow(a.allocs.apply(resp, now), now)
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
	cctx, cancel := context.WithTimeout(ctx, a.f.cfg.CallTimeout)
	resp, err := client.UpdateAlloc(cctx, &droverv1.UpdateAllocRequest{NodeId: a.node.ID, SecretId: a.node.Secret, Allocs: updates})
	cancel()
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
	a.failures[taskReport] = 0
	a.f.stats.reportCalls.Add(1)
	a.f.stats.allocReports.Add(uint64(len(updates)))
	more := a.allocs.acked(updates, resp.GetIndex(), resp.GetUnknownAllocIds())
	now := time.Now().UnixNano()
	if a.Status() == droverv1.NodeStatus_NODE_STATUS_INITIALIZING && a.rushed.CompareAndSwap(false, true) {
		// The report is what the servers waited for to admit the node.
		a.schedule(taskHeartbeat, now)
	}
	return now, more
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
