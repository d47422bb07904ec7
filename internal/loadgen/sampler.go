package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// sampler samples the servers' resident memory once a second, keeping the
// highest, and prints a progress line each time.
type sampler struct {
	r      *runner
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	rss        []float64
	phase      string
	phaseStart time.Time
}

// startSampler starts sampling until stop or the end of ctx.
func startSampler(ctx context.Context, r *runner) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{r: r, cancel: cancel, done: make(chan struct{}), rss: make([]float64, len(r.cfg.MetricsURLs)), phaseStart: time.Now()}
	go s.loop(ctx)
	return s
}

func (s *sampler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, err := s.r.scrapeAll(ctx)
		s.mu.Lock()
		for i := range m {
			s.rss[i] = max(s.rss[i], m[i].RSSBytes)
		}
		phase, since := s.phase, time.Since(s.phaseStart)
		s.mu.Unlock()
		s.progress(phase, since, m, err)
	}
}

// progress prints one line about the fleet and the servers.
func (s *sampler) progress(phase string, since time.Duration, m []scrapedMetrics, err error) {
	w := s.r.cfg.Progress
	if w == nil {
		return
	}
	st := s.r.fleet.Stats()
	line := fmt.Sprintf("%-10s %6s  nodes ready %d/%d  allocs pending %d running %d complete %d  heartbeats %d",
		phase, since.Round(time.Second), st.NodeStatuses[droverv1.NodeStatus_NODE_STATUS_READY], len(s.r.cfg.Fleet.Nodes),
		st.AllocStatuses[droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING],
		st.AllocStatuses[droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING],
		st.AllocStatuses[droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE], st.HeartbeatsOK)
	for i := range m {
		line += fmt.Sprintf("  s%d %.0fMB", i+1, m[i].RSSBytes/(1<<20))
	}
	if err != nil {
		line += "  (metrics: " + err.Error() + ")"
	}
	fmt.Fprintln(w, line)
}

// setPhase names what the run is doing, for the progress lines.
func (s *sampler) setPhase(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.phaseStart = name, time.Now()
}

// maxRSS returns the highest resident memory sampled of each server.
func (s *sampler) maxRSS() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]float64(nil), s.rss...)
}

// stop ends sampling and waits for the sampler to return.
func (s *sampler) stop() {
	s.cancel()
	<-s.done
}
