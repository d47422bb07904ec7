package server

import (
	"context"
	"fmt"
	"sync"
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

	// leaderCtx is the current leadership's context; nil while this
	// server does not lead.
	leaderMu  sync.Mutex
	leaderCtx context.Context
}

func (g *garbageCollector) duty() LeaderDuty {
	var wg sync.WaitGroup
	return LeaderDuty{
		Name: "garbage collection",
		Start: func(ctx context.Context) error {
			g.leaderMu.Lock()
			g.leaderCtx = ctx
			g.leaderMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.run(ctx)
			}()
			return nil
		},
		Stop: func() {
			wg.Wait()
			g.leaderMu.Lock()
			g.leaderCtx = nil
			g.leaderMu.Unlock()
		},
	}
}

// run collects every interval until leadership ends.
func (g *garbageCollector) run(ctx context.Context) {
	ticker := time.NewTicker(g.s.cfg.GC.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
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
}

// GarbageCollect collects everything collectable now, whatever its age
// (`drover system gc`). It runs on the leader only.
func (g *garbageCollector) GarbageCollect(ctx context.Context) (*droverv1.GarbageCollectResponse, error) {
	g.leaderMu.Lock()
	leaderCtx := g.leaderCtx
	g.leaderMu.Unlock()
	if leaderCtx == nil {
		return nil, fmt.Errorf("garbage collection runs on the leader, and this server does not lead: %w", rpc.ErrUnavailable)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(leaderCtx, cancel)
	defer stop()
	return g.collect(ctx, gc.Force())
}

// collect plans on the newest state and writes the entries one by one,
// counting what the state store actually deleted.
func (g *garbageCollector) collect(ctx context.Context, th gc.Thresholds) (*droverv1.GarbageCollectResponse, error) {
	entries := gc.Plan(g.s.state.Snapshot(), th, time.Now(), g.s.cfg.GC.BatchSize)
	res := &droverv1.GarbageCollectResponse{}
	for _, e := range entries {
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
