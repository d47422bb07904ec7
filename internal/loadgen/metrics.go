package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric families the report is built from.
const (
	metricCPU       = "process_cpu_seconds_total"
	metricRSS       = "process_resident_memory_bytes"
	metricRaftBytes = "drover_raft_entry_bytes_proposed_total"
	// The plan applier's counters, kept by whichever server leads.
	metricPlansApplied  = "drover_plans_applied_total"
	metricPlansRejected = "drover_plans_partially_rejected_total"
	metricRelocated     = "drover_plan_placements_relocated_total"
	// The scheduler workers' histograms, on every server: an evaluation
	// through its scheduler (its plans' answers included), and one plan's
	// round trip to the applier.
	metricWorkerProcess = "drover_worker_process_seconds"
	metricPlanSubmit    = "drover_worker_plan_submit_seconds"
)

// reportMetrics are the families scrape asks for: a server's whole page
// is some 3,400 lines (gRPC's counters for every method and code), and
// rendering and parsing it once a second cost the servers about 2% of
// their CPU and the load driver 15% of its own.
var reportMetrics = []string{metricCPU, metricRSS, metricRaftBytes, metricPlansApplied, metricPlansRejected, metricRelocated,
	metricWorkerProcess, metricPlanSubmit}

// scrapedMetrics are the metrics the report uses, from one server.
type scrapedMetrics struct {
	CPUSeconds    float64
	RSSBytes      float64
	RaftBytes     float64
	PlansApplied  float64
	PlansRejected float64
	Relocated     float64
	Workers       workerTimes
}

// workerTimes are the scheduler workers' time sums and counts: evaluations
// through their scheduler and plans' round trips to the applier.
type workerTimes struct {
	EvalSeconds float64
	Evals       float64
	PlanSeconds float64
	Plans       float64
}

// add returns w with o added.
func (w workerTimes) add(o workerTimes) workerTimes {
	return workerTimes{w.EvalSeconds + o.EvalSeconds, w.Evals + o.Evals, w.PlanSeconds + o.PlanSeconds, w.Plans + o.Plans}
}

// sub returns w with o taken away: what was observed between two scrapes.
func (w workerTimes) sub(o workerTimes) workerTimes {
	return w.add(workerTimes{-o.EvalSeconds, -o.Evals, -o.PlanSeconds, -o.Plans})
}

// means returns the mean time of an evaluation and of a plan's round
// trip; 0 for either without observations.
func (w workerTimes) means() (eval, plan float64) {
	if w.Evals > 0 {
		eval = w.EvalSeconds / w.Evals
	}
	if w.Plans > 0 {
		plan = w.PlanSeconds / w.Plans
	}
	return eval, plan
}

// scrape reads one server's metrics endpoint, asking only for the
// families the report uses (the name[] parameter of client_golang's
// handler; an endpoint that ignores it answers with every family, which
// sumFamilies reads just the same).
func scrape(ctx context.Context, client *http.Client, endpoint string) (scrapedMetrics, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", endpoint, err)
	}
	q := u.Query()
	for _, name := range reportMetrics {
		q.Add("name[]", name)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", endpoint, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %s", endpoint, resp.Status)
	}
	sums, err := sumFamilies(resp.Body, reportMetrics...)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", endpoint, err)
	}
	return scrapedMetrics{
		CPUSeconds: sums[metricCPU], RSSBytes: sums[metricRSS], RaftBytes: sums[metricRaftBytes],
		PlansApplied: sums[metricPlansApplied], PlansRejected: sums[metricPlansRejected], Relocated: sums[metricRelocated],
		Workers: workerTimes{
			EvalSeconds: sums[metricWorkerProcess+"_sum"], Evals: sums[metricWorkerProcess+"_count"],
			PlanSeconds: sums[metricPlanSubmit+"_sum"], Plans: sums[metricPlanSubmit+"_count"],
		},
	}, nil
}

// sumFamilies reads the Prometheus text format and returns, for each
// wanted metric name, the sum of its samples over all label sets (the
// counters, gauges and untyped samples the report uses); for a histogram,
// the sums of its observations' sums and counts, as name_sum and
// name_count.
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
			if h := m.GetHistogram(); h != nil {
				sums[name+"_sum"] += h.GetSampleSum()
				sums[name+"_count"] += float64(h.GetSampleCount())
			}
		}
	}
	return sums, nil
}

// metricsDelta is what the servers counted between two scrapes, summed
// over the servers.
type metricsDelta struct {
	CPUSeconds    float64
	RaftBytes     float64
	PlansApplied  float64
	PlansRejected float64
	Relocated     float64
	Workers       workerTimes
}

// delta sums the change of each server's counters from m0 to m1 (nil
// without metrics URLs).
func delta(m0, m1 []scrapedMetrics) metricsDelta {
	var d metricsDelta
	for i := range m1 {
		d.CPUSeconds += m1[i].CPUSeconds - m0[i].CPUSeconds
		d.RaftBytes += m1[i].RaftBytes - m0[i].RaftBytes
		d.PlansApplied += m1[i].PlansApplied - m0[i].PlansApplied
		d.PlansRejected += m1[i].PlansRejected - m0[i].PlansRejected
		d.Relocated += m1[i].Relocated - m0[i].Relocated
		d.Workers = d.Workers.add(m1[i].Workers.sub(m0[i].Workers))
	}
	return d
}
