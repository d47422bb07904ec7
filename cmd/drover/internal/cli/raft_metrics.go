package cli

import (
	"fmt"
	"time"

	metrics "github.com/armon/go-metrics"
	armonprom "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// raftMetricsExpiry drops a raft metric nobody has updated for this long
// (a follower's leader-only figures after it lost leadership).
const raftMetricsExpiry = 5 * time.Minute

// wireRaftMetrics sends hashicorp/raft's metrics into the server's
// Prometheus registry. raft reports through go-metrics' process-wide
// sink, so this is done here, once per process, by the server command
// rather than by the server package (tests run several servers in one
// process).
func wireRaftMetrics(reg prometheus.Registerer) error {
	sink, err := armonprom.NewPrometheusSinkFrom(armonprom.PrometheusOpts{Registerer: reg, Expiration: raftMetricsExpiry})
	if err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	cfg := metrics.DefaultConfig("drover")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false // the Go collector reports those
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}
