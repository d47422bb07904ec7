package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// pollInterval is how often the driver looks at the fleet and the servers.
const pollInterval = time.Second

// runner is one run of the load driver.
type runner struct {
	cfg     Config
	cl      *clusterClient
	fleet   *simagent.Fleet
	http    *http.Client
	sampler *sampler
	// jobs are the run's jobs, by id, as last submitted; stopped the ids
	// it deregistered.
	jobs    map[string]*droverv1.Job
	stopped map[string]bool
	// placed are the allocations already counted as placements.
	placed map[string]bool
	// began is when the run started, before the fleet registered; the
	// steps' StartSeconds count from it.
	began time.Time
	// jobWrites counts the job registrations and deregistrations the
	// servers acknowledged.
	jobWrites atomic.Uint64
}

// Run starts the fleet, waits until every node is ready, runs the steps in
// order and reports what the cluster did. The fleet is stopped before Run
// returns.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cl, err := dialCluster(cfg.Servers, cfg.DialOptions)
	if err != nil {
		return nil, err
	}
	defer cl.close()
	fleet, err := simagent.NewFleet(cfg.Fleet)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	defer fleet.Stop()
	r := &runner{
		cfg: cfg, cl: cl, fleet: fleet,
		http:    &http.Client{Timeout: 10 * time.Second},
		jobs:    make(map[string]*droverv1.Job),
		stopped: make(map[string]bool),
		placed:  make(map[string]bool),
	}
	return r.run(ctx)
}

func (r *runner) run(ctx context.Context) (*Report, error) {
	rep := &Report{Nodes: len(r.cfg.Fleet.Nodes)}
	idx0, err := r.cl.maxIndex(ctx)
	if err != nil {
		return nil, err
	}
	m0, err := r.scrapeAll(ctx)
	if err != nil {
		return nil, err
	}
	r.sampler = startSampler(ctx, r)
	defer r.sampler.stop()

	r.began = time.Now()
	r.sampler.setPhase("register")
	if err := r.fleet.Start(ctx); err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	if err := r.waitFleetReady(ctx); err != nil {
		return nil, err
	}
	rep.FleetReadySeconds = time.Since(r.began).Seconds()

	for _, st := range r.cfg.Steps {
		sr, err := r.runStep(ctx, st)
		if err != nil {
			return nil, err
		}
		rep.Steps = append(rep.Steps, sr)
	}
	rep.Total = total(rep.Steps)
	r.fleet.Stop()
	if err := r.finish(ctx, rep, idx0, m0); err != nil {
		return nil, err
	}
	rep.Total.UpdateAlloc, rep.Total.GetAllocs = rep.UpdateAlloc, rep.GetAllocs
	return rep, nil
}

// waitFleetReady waits until every simulated node is ready.
func (r *runner) waitFleetReady(ctx context.Context) error {
	want := len(r.cfg.Fleet.Nodes)
	return poll(ctx, func() (bool, error) {
		return r.fleet.Stats().NodeStatuses[droverv1.NodeStatus_NODE_STATUS_READY] == want, nil
	}, func() error {
		return fmt.Errorf("loadgen: fleet not ready: %v", r.fleet.Stats().NodeStatuses)
	})
}

// finish fills in the figures of the whole run, once the fleet stopped.
func (r *runner) finish(ctx context.Context, rep *Report, idx0 uint64, m0 []scrapedMetrics) error {
	st := r.fleet.Stats()
	rep.UpdateAlloc, rep.GetAllocs = fleetLatencies(st)
	idx, err := r.convergedIndexes(ctx)
	if err != nil {
		return err
	}
	rep.RaftEntries = maxOf(idx) - idx0
	m1, err := r.scrapeAll(ctx)
	if err != nil {
		return err
	}
	d := delta(m0, m1)
	rep.RaftBytes = d.RaftBytes
	if rep.Writes = fleetWrites(st) + r.jobWrites.Load(); rep.Writes > 0 {
		rep.CPUMicrosPerWrite = 1e6 * d.CPUSeconds / float64(rep.Writes)
	}
	rss := r.sampler.maxRSS()
	for i, addr := range r.cfg.Servers {
		s := ServerReport{Addr: addr, AppliedIndex: idx[i]}
		if len(m1) > 0 {
			s.CPUSeconds = m1[i].CPUSeconds - m0[i].CPUSeconds
			s.MaxRSSBytes = max(rss[i], m1[i].RSSBytes)
		}
		rep.Servers = append(rep.Servers, s)
	}
	if rep.NodesByStatus, err = r.cl.nodeCounts(ctx); err != nil {
		return err
	}
	rep.AllocsByStatus, err = r.cl.allocCounts(ctx)
	return err
}

// convergedIndexes waits until every server applied the same index (the
// followers catch up with the leader's last writes) and returns them.
func (r *runner) convergedIndexes(ctx context.Context) ([]uint64, error) {
	var idx []uint64
	err := poll(ctx, func() (bool, error) {
		var err error
		idx, err = r.cl.appliedIndexes(ctx)
		if err != nil {
			return false, err
		}
		for _, i := range idx {
			if i != idx[0] {
				return false, nil
			}
		}
		return true, nil
	}, func() error { return fmt.Errorf("loadgen: servers' applied indexes differ: %v", idx) })
	return idx, err
}

// scrapeAll reads every server's metrics; nil without metrics URLs.
func (r *runner) scrapeAll(ctx context.Context) ([]scrapedMetrics, error) {
	if len(r.cfg.MetricsURLs) == 0 {
		return nil, nil
	}
	out := make([]scrapedMetrics, len(r.cfg.MetricsURLs))
	for i, u := range r.cfg.MetricsURLs {
		m, err := scrape(ctx, r.http, u)
		if err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
		}
		out[i] = m
	}
	return out, nil
}

// poll calls check every pollInterval until it reports true or fails. When
// ctx ends first, the error of timedOut is returned (wrapping ctx's).
func poll(ctx context.Context, check func() (bool, error), timedOut func() error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		ok, err := check()
		if err != nil && ctx.Err() == nil {
			return err
		}
		if ok && err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(timedOut(), ctx.Err())
		case <-t.C:
		}
	}
}
