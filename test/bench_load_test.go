package test_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/droverhq/drover/internal/loadgen"
	"github.com/droverhq/drover/test/cluster"
)

// The load driver's scenarios (docs/benchmarks.md, issue 6). Each
// benchmark starts a 3-server cluster of real processes sharing the machine
// with the simulated fleet; its b.N runs reuse that cluster, each with a
// fleet and jobs of its own (the earlier runs' nodes and jobs stay in the
// state). DROVER_BENCH_SCALE (default 1) multiplies their sizes.
//
//	go test -run '^$' -bench 'Scenario' -benchtime 1x -count 3 -timeout 120m ./test/

// BenchmarkScenarioC1MSmall: 5,000 nodes, 100 service jobs of 1,000.
func BenchmarkScenarioC1MSmall(b *testing.B) {
	benchScenario(b, func(s float64) loadgen.Config { return loadgen.C1MSmall(s) })
}

// BenchmarkScenarioChurn: waves of batch jobs while 10% of 2,000 nodes
// disconnect and return; the servers' TTLs are short enough (10-20s, plus
// 10s grace) for a 40s silence to mark a node down.
func BenchmarkScenarioChurn(b *testing.B) {
	benchScenario(b, func(s float64) loadgen.Config { return loadgen.Churn(s) },
		"-heartbeat-min-ttl", "10s", "-heartbeat-max-per-second", "1000")
}

// BenchmarkScenarioScaleUpDown: one job scaled 0 → 20,000 → 0.
func BenchmarkScenarioScaleUpDown(b *testing.B) {
	benchScenario(b, func(s float64) loadgen.Config { return loadgen.ScaleUpDown(s) })
}

// BenchmarkScenarioHeartbeats50k: 50,000 heartbeat-only nodes for a minute,
// with the default TTL policy from a 10s minimum.
func BenchmarkScenarioHeartbeats50k(b *testing.B) {
	benchScenario(b, func(s float64) loadgen.Config { return loadgen.Heartbeats(int(50000 * s)) },
		"-heartbeat-min-ttl", "10s")
}

// benchScenario starts a 3-server cluster with metrics and the given flags
// and runs the preset b.N times, reporting the mean of the key figures.
func benchScenario(b *testing.B, preset func(scale float64) loadgen.Config, args ...string) {
	scale := 1.0
	if v := os.Getenv("DROVER_BENCH_SCALE"); v != "" {
		var err error
		if scale, err = strconv.ParseFloat(v, 64); err != nil {
			b.Fatalf("DROVER_BENCH_SCALE: %v", err)
		}
	}
	c := cluster.New(b, droverBin, 3, cluster.Args(append([]string{"-http-addr", "127.0.0.1:0", "-log-level", "info"}, args...)...))
	ctx, cancel := context.WithTimeout(b.Context(), benchSetupTimeout)
	defer cancel()
	c.WaitLeader(ctx)
	var sum benchFigures
	b.ResetTimer()
	for range b.N {
		cfg := preset(scale)
		for _, s := range c.Servers() {
			cfg.Servers = append(cfg.Servers, s.RPCAddr())
			cfg.MetricsURLs = append(cfg.MetricsURLs, "http://"+s.Info().HTTPAddr+"/metrics")
		}
		cfg.Progress = os.Stderr
		rep, err := loadgen.Run(b.Context(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		// b.Log truncates a benchmark's log; the report goes out whole.
		fmt.Fprintf(os.Stderr, "report:\n%s", rep)
		sum.add(rep)
	}
	b.StopTimer()
	sum.report(b)
}

// benchFigures sums the figures of several runs.
type benchFigures struct {
	n                                   float64
	placementsPerSec, settled, evalsSec float64
	entries, mb, heartbeatsPerSec       float64
	updP50, updP99, getP50, getP99      float64
	cpu, rss                            float64
	cpuPerAlloc, cpuPerWrite, rejected  float64
}

func (f *benchFigures) add(r *loadgen.Report) {
	f.n++
	f.placementsPerSec += r.Total.PlacementsPerSecond
	f.settled += r.Total.SettledSeconds
	f.evalsSec += r.Total.EvalsPerSecond
	f.cpuPerAlloc += r.Total.CPUMillisPerPlacement
	f.cpuPerWrite += r.CPUMicrosPerWrite
	f.rejected += r.Total.RejectedPlansPer1000
	f.entries += float64(r.RaftEntries)
	f.mb += r.RaftBytes / 1e6
	for _, s := range r.Steps {
		f.heartbeatsPerSec = max(f.heartbeatsPerSec, s.HeartbeatsPerSecond)
	}
	f.updP50 += r.UpdateAlloc.P50Seconds * 1e3
	f.updP99 += r.UpdateAlloc.P99Seconds * 1e3
	f.getP50 += r.GetAllocs.P50Seconds * 1e3
	f.getP99 += r.GetAllocs.P99Seconds * 1e3
	var rss float64
	for _, s := range r.Servers {
		f.cpu += s.CPUSeconds
		rss = max(rss, s.MaxRSSBytes)
	}
	f.rss += rss / (1 << 20)
}

func (f *benchFigures) report(b *testing.B) {
	if f.n == 0 {
		return
	}
	for _, m := range []struct {
		v    float64
		unit string
	}{
		{f.placementsPerSec, "placements/s"}, {f.settled, "all-running-s"}, {f.evalsSec, "evals/s"},
		{f.entries, "raft-entries"}, {f.mb, "raft-MB"}, {f.updP50, "updatealloc-p50-ms"}, {f.updP99, "updatealloc-p99-ms"},
		{f.getP50, "getallocs-p50-ms"}, {f.getP99, "getallocs-p99-ms"}, {f.cpu, "server-cpu-s"}, {f.rss, "max-server-rss-MB"},
		{f.cpuPerAlloc, "server-cpu-ms/alloc"}, {f.cpuPerWrite, "server-cpu-us/write"}, {f.rejected, "rejected-plans/1k-placements"},
	} {
		b.ReportMetric(m.v/f.n, m.unit)
	}
	b.ReportMetric(f.heartbeatsPerSec, "max-step-heartbeats/s")
}
