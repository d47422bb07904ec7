package raftmetrics

import (
	"fmt"
	"time"

	metrics "github.com/armon/go-metrics"
	armonprom "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// expiry drops a raft metric nobody has updated for this long (a
// follower's leader-only figures after it lost leadership).
const expiry = 5 * time.Minute

// Install sends raft's metrics, renamed by Sink, into reg. raft reports
// through go-metrics' process-wide sink, so this is done once per process
// by the command that runs a server (`drover server`, `drover dev`), not
// by the server package: tests run several servers in one process.
func Install(reg prometheus.Registerer) error {
	prom, err := armonprom.NewPrometheusSinkFrom(armonprom.PrometheusOpts{Registerer: reg, Expiration: expiry})
	if err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	cfg := metrics.DefaultConfig("drover")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false // the Go collector reports those
	if _, err := metrics.NewGlobal(cfg, Sink{Next: prom}); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}
