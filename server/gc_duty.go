package server

import (
	"context"
	"fmt"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/gc"
)

// garbageCollector is the leader's garbage collection: periodic, and on
// demand through OperatorService.GarbageCollect. It plans on a snapshot
// and writes the deletions in bounded raft entries; the state store checks
// every object again as it applies them.
//
// A periodic and an on-demand run may overlap: both plan on snapshots and
// the state store applies each deletion once, so the second finds the
// objects gone and counts nothing for them. No lock is held across the
// raft writes.
type garbageCollector struct {
	s *Server
}

func (g *garbageCollector) duty() LeaderDuty {
	return periodicDuty("garbage collection", g.s.cfg.GC.Interval, g.round)
}

// round runs one periodic collection.
func (g *garbageCollector) round(ctx context.Context) {
	if n, err := g.collectExpiredTokens(ctx); err != nil && ctx.Err() == nil {
		g.s.logger.Warn("collecting expired ACL tokens failed", "err", err)
	} else if n > 0 {
		g.s.logger.Info("expired ACL tokens deleted", "tokens", n)
	}
	res, err := g.collect(ctx, g.s.cfg.GC.Thresholds)
	switch {
	case err != nil && ctx.Err() == nil:
		g.s.logger.Warn("garbage collection failed", "err", err)
	case res.GetEntries() > 0:
		g.s.logger.Info("garbage collected", "nodes", res.GetNodes(), "allocs", res.GetAllocs(),
			"evals", res.GetEvals(), "jobs", res.GetJobs(), "job_versions", res.GetJobVersions(), "entries", res.GetEntries())
	}
}

// GarbageCollect collects everything collectable now, whatever its age
// (`drover system gc`). It runs on the leader only; should leadership be
// lost midway, raft refuses the next entry.
func (g *garbageCollector) GarbageCollect(ctx context.Context) (*droverv1.GarbageCollectResponse, error) {
	if !g.s.leading() {
		return nil, fmt.Errorf("garbage collection runs on the leader, and this server does not lead: %w", rpc.ErrUnavailable)
	}
	if _, err := g.collectExpiredTokens(ctx); err != nil {
		return nil, err
	}
	return g.collect(ctx, gc.Force())
}

// collect plans on the newest state and writes the entries one by one,
// counting what the state store actually deleted.
func (g *garbageCollector) collect(ctx context.Context, th gc.Thresholds) (*droverv1.GarbageCollectResponse, error) {
	entries := gc.Plan(g.s.state.Snapshot(), th, time.Now(), g.s.cfg.GC.BatchSize)
	res := &droverv1.GarbageCollectResponse{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("gc stopped after %d of %d entries: %w", res.Entries, len(entries), err)
		}
		index, resp, err := g.s.Apply(ctx, droverv1.MessageTypeGC, e)
		if err != nil {
			return res, fmt.Errorf("gc entry %d of %d: %w", res.Entries+1, len(entries), err)
		}
		r, ok := resp.(*state.GCResult)
		if !ok {
			return res, fmt.Errorf("gc entry at index %d: unexpected apply response %T", index, resp)
		}
		res.Entries++
		res.Nodes += int64(r.Nodes)
		res.Allocs += int64(r.Allocs)
		res.Evals += int64(r.Evals)
		res.Jobs += int64(r.Jobs)
		res.JobVersions += int64(r.JobVersions)
	}
	return res, nil
}
