package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestScrapeAsksOnlyForReportMetrics serves a registry through the
// handler the servers use, with a large family the report does not read,
// and checks that scrape sums the families it wants and is sent nothing
// else.
func TestScrapeAsksOnlyForReportMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cpu := prometheus.NewCounter(prometheus.CounterOpts{Name: metricCPU, Help: "cpu"})
	cpu.Add(12.5)
	relocated := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricRelocated, Help: "relocated"}, []string{"node_class"})
	relocated.WithLabelValues("a").Add(3)
	relocated.WithLabelValues("b").Add(4)
	// The workers' histograms, with labels as the servers have them.
	process := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricWorkerProcess, Help: "process"}, []string{"scheduler", "outcome"})
	process.WithLabelValues("service", "ok").Observe(0.25)
	process.WithLabelValues("service", "ok").Observe(0.5)
	process.WithLabelValues("batch", "error").Observe(1)
	submit := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricPlanSubmit, Help: "submit"}, []string{"outcome"})
	submit.WithLabelValues("ok").Observe(0.125)
	noise := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_server_handled_total", Help: "noise"}, []string{"method"})
	for i := range 500 {
		noise.WithLabelValues(strings.Repeat("m", i%40) + string(rune('a'+i%26))).Inc()
	}
	reg.MustRegister(cpu, relocated, process, submit, noise)

	var body strings.Builder
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Accept-Encoding") // keep the recorded body readable
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		body.Reset()
		body.Write(rec.Body.Bytes())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := scrape(ctx, srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got.CPUSeconds != 12.5 || got.Relocated != 7 {
		t.Errorf("scraped cpu %g relocated %g, want 12.5 and 7", got.CPUSeconds, got.Relocated)
	}
	if want := (workerTimes{EvalSeconds: 1.75, Evals: 3, PlanSeconds: 0.125, Plans: 1}); got.Workers != want {
		t.Errorf("scraped workers %+v, want %+v", got.Workers, want)
	}
	if strings.Contains(body.String(), "grpc_server_handled_total") {
		t.Errorf("the endpoint sent families the report does not read (%d bytes)", body.Len())
	}
}

// TestDelta checks that the change between two scrapes is summed over the
// servers, the workers' times included.
func TestDelta(t *testing.T) {
	m0 := []scrapedMetrics{
		{CPUSeconds: 10, Relocated: 5, Workers: workerTimes{EvalSeconds: 2, Evals: 4, PlanSeconds: 1, Plans: 2}},
		{CPUSeconds: 20, Workers: workerTimes{EvalSeconds: 1, Evals: 1}},
	}
	m1 := []scrapedMetrics{
		{CPUSeconds: 12, Relocated: 8, Workers: workerTimes{EvalSeconds: 3.5, Evals: 7, PlanSeconds: 1.5, Plans: 4}},
		{CPUSeconds: 21, Workers: workerTimes{EvalSeconds: 2, Evals: 3, PlanSeconds: 0.5, Plans: 1}},
	}
	want := metricsDelta{CPUSeconds: 3, Relocated: 3, Workers: workerTimes{EvalSeconds: 2.5, Evals: 5, PlanSeconds: 1, Plans: 3}}
	if got := delta(m0, m1); got != want {
		t.Errorf("delta = %+v, want %+v", got, want)
	}
}
