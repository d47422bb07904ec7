package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric families the report is built from.
const (
	metricCPU       = "process_cpu_seconds_total"
	metricRSS       = "process_resident_memory_bytes"
	metricRaftBytes = "drover_raft_entry_bytes_proposed_total"
)

// scrapedMetrics are the metrics the report uses, from one server.
type scrapedMetrics struct {
	CPUSeconds float64
	RSSBytes   float64
	RaftBytes  float64
}

// scrape reads one server's metrics endpoint.
func scrape(ctx context.Context, client *http.Client, url string) (scrapedMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %s", url, resp.Status)
	}
	sums, err := sumFamilies(resp.Body, metricCPU, metricRSS, metricRaftBytes)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", url, err)
	}
	return scrapedMetrics{CPUSeconds: sums[metricCPU], RSSBytes: sums[metricRSS], RaftBytes: sums[metricRaftBytes]}, nil
}

// sumFamilies reads the Prometheus text format and returns, for each
// wanted metric name, the sum of its samples over all label sets (the
// counters, gauges and untyped samples the report uses).
func sumFamilies(r io.Reader, names ...string) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	sums := make(map[string]float64, len(names))
	for _, name := range names {
		for _, m := range families[name].GetMetric() {
			sums[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return sums, nil
}
