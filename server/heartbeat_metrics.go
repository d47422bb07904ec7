package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Heartbeat metrics: what the leader's timers hold and how often nodes
// were marked, including the mass-failure guard's state.
var (
	heartbeatsDesc = prometheus.NewDesc("drover_heartbeats_total",
		"Node heartbeats (and registrations) that reset a timer on this server while it led.", nil, nil)
	heartbeatTrackedDesc = prometheus.NewDesc("drover_heartbeat_nodes_tracked",
		"Nodes with a heartbeat timer on this server (0 on followers).", nil, nil)
	heartbeatPendingDesc = prometheus.NewDesc("drover_heartbeat_pending_marks",
		"Nodes whose timer expired, waiting to be marked down or disconnected.", nil, nil)
	heartbeatExpiredDesc = prometheus.NewDesc("drover_heartbeat_expired_total",
		"Heartbeat timers that expired.", nil, nil)
	heartbeatMarkedDesc = prometheus.NewDesc("drover_heartbeat_marked_total",
		"Expired nodes handed on to be marked down or disconnected.", nil, nil)
	heartbeatThrottledDesc = prometheus.NewDesc("drover_heartbeat_mass_failure_throttled",
		"Whether (1) so many nodes miss heartbeats at once that the leader marks them at a throttled rate.", nil, nil)
	heartbeatEngagementsDesc = prometheus.NewDesc("drover_heartbeat_mass_failure_engagements_total",
		"Times the mass-failure guard engaged.", nil, nil)
)

// Describe implements prometheus.Collector.
func (h *heartbeats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{heartbeatsDesc, heartbeatTrackedDesc, heartbeatPendingDesc,
		heartbeatExpiredDesc, heartbeatMarkedDesc, heartbeatThrottledDesc, heartbeatEngagementsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector, reading the timers' counters
// at scrape time.
func (h *heartbeats) Collect(ch chan<- prometheus.Metric) {
	st := h.timers.Stats()
	throttled := 0.0
	if st.Throttled {
		throttled = 1
	}
	ch <- prometheus.MustNewConstMetric(heartbeatsDesc, prometheus.CounterValue, float64(h.resets.Load()))
	ch <- prometheus.MustNewConstMetric(heartbeatTrackedDesc, prometheus.GaugeValue, float64(st.Tracked))
	ch <- prometheus.MustNewConstMetric(heartbeatPendingDesc, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(heartbeatExpiredDesc, prometheus.CounterValue, float64(st.Expired))
	ch <- prometheus.MustNewConstMetric(heartbeatMarkedDesc, prometheus.CounterValue, float64(st.Marked))
	ch <- prometheus.MustNewConstMetric(heartbeatThrottledDesc, prometheus.GaugeValue, throttled)
	ch <- prometheus.MustNewConstMetric(heartbeatEngagementsDesc, prometheus.CounterValue, float64(st.ThrottleEngagements))
}
