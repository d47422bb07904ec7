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
	noise := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_server_handled_total", Help: "noise"}, []string{"method"})
	for i := range 500 {
		noise.WithLabelValues(strings.Repeat("m", i%40) + string(rune('a'+i%26))).Inc()
	}
	reg.MustRegister(cpu, relocated, noise)

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
	if strings.Contains(body.String(), "grpc_server_handled_total") {
		t.Errorf("the endpoint sent families the report does not read (%d bytes)", body.Len())
	}
}
