package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// runAgents runs a fleet of cfg until ctx ends, printing a status line to
// w every interval, then stops it and waits for all of its goroutines.
func runAgents(ctx context.Context, cfg simagent.Config, w io.Writer, interval time.Duration) error {
	fleet, err := simagent.NewFleet(cfg)
	if err != nil {
		return err
	}
	defer fleet.Stop()
	if err := fleet.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "drover agent: %d simulated nodes against %s\n", len(cfg.Nodes), strings.Join(cfg.Servers, ","))
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	last, lastAt := fleet.Stats(), time.Now()
	var causes failureCauses
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-ticker.C:
			st := fleet.Stats()
			fmt.Fprintln(w, statusLine(last, st, now.Sub(lastAt)))
			causes.report(w, last, st)
			last, lastAt = st, now
		}
	}
}

// failureCauses tells the operator of a fleet why its calls fail to reach
// the servers (a server down, a TLS mismatch): the agents retry such
// calls on their own, so without it the status lines would only show
// nodes that never become ready. Each cause is said once, and again only
// after calls have worked in between.
type failureCauses struct{ said string }

// report prints the likely cause of the calls that failed between prev
// and cur, unless it was said already.
func (c *failureCauses) report(w io.Writer, prev, cur simagent.Stats) {
	if cur.Registrations+cur.HeartbeatsOK+cur.ReportCalls > prev.Registrations+prev.HeartbeatsOK+prev.ReportCalls {
		c.said = ""
	}
	if cur.RegisterFailures+cur.HeartbeatsFailed+cur.ReportFailures == prev.RegisterFailures+prev.HeartbeatsFailed+prev.ReportFailures {
		return
	}
	var ce *connectionError
	if !errors.As(cur.LastFailure, &ce) || ce.cause == c.said {
		return
	}
	c.said = ce.cause
	fmt.Fprintf(w, "calls to the servers fail: %v\n%s\n", cur.LastFailure, ce.cause)
}

// statusLine summarises a fleet over the interval d from prev to cur:
//
//	nodes 98 ready 2 initializing | allocs 40 running 2 pending | 9.8 heartbeats/s 1.2 reports/s | p99 UpdateAlloc 3ms GetAllocs 12ms
func statusLine(prev, cur simagent.Stats, d time.Duration) string {
	secs := max(d.Seconds(), 1e-9)
	return fmt.Sprintf("nodes %s | allocs %s | %.1f heartbeats/s %.1f reports/s | p99 UpdateAlloc %s GetAllocs %s",
		counts(cur.NodeStatuses, func(s droverv1.NodeStatus) string { return enumName(s) }),
		counts(cur.AllocStatuses, func(s droverv1.AllocClientStatus) string { return enumName(s) }),
		float64(cur.HeartbeatsOK-prev.HeartbeatsOK)/secs,
		float64(cur.ReportCalls-prev.ReportCalls)/secs,
		cur.UpdateAllocLatency.Since(prev.UpdateAllocLatency).Quantile(0.99),
		cur.GetAllocsLatency.Since(prev.GetAllocsLatency).Quantile(0.99))
}

// counts prints "3 ready 1 down", largest first, or "none".
func counts[K comparable](m map[K]int, name func(K) string) string {
	type kv struct {
		name string
		n    int
	}
	var list []kv
	for k, n := range m {
		if n > 0 {
			list = append(list, kv{name(k), n})
		}
	}
	if len(list) == 0 {
		return "none"
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].name < list[j].name
	})
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = fmt.Sprintf("%d %s", e.n, e.name)
	}
	return strings.Join(parts, " ")
}
