package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/droverhq/drover/rpc"
)

// Limits metrics: what the RPC layer's limits hold now and what they
// refused.
var (
	callsInFlightDesc = prometheus.NewDesc("drover_rpc_calls_in_flight",
		"Unary calls holding a slot of their class's limit on this server, by class (agent, operator).", []string{"class"}, nil)
	callsRefusedDesc = prometheus.NewDesc("drover_rpc_calls_refused_total",
		"Unary calls refused RESOURCE_EXHAUSTED because their class's limit was reached, by class (agent, operator).", []string{"class"}, nil)
	connectionsDesc = prometheus.NewDesc("drover_rpc_connections",
		"gRPC connections open on this server.", nil, nil)
	connectionsRefusedDesc = prometheus.NewDesc("drover_rpc_connections_refused_total",
		"gRPC connections closed at accept because their remote address had the most connections open.", nil, nil)
)

// limitsCollector reads the limits' counters at scrape time.
type limitsCollector struct {
	stats func() rpc.LimitStats
}

// Describe implements prometheus.Collector.
func (c limitsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{callsInFlightDesc, callsRefusedDesc, connectionsDesc, connectionsRefusedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c limitsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(callsInFlightDesc, prometheus.GaugeValue, float64(st.AgentCalls), "agent")
	ch <- prometheus.MustNewConstMetric(callsInFlightDesc, prometheus.GaugeValue, float64(st.ListCalls), "list")
	ch <- prometheus.MustNewConstMetric(callsInFlightDesc, prometheus.GaugeValue, float64(st.OperatorCalls), "operator")
	ch <- prometheus.MustNewConstMetric(callsRefusedDesc, prometheus.CounterValue, float64(st.RefusedAgentCalls), "agent")
	ch <- prometheus.MustNewConstMetric(callsRefusedDesc, prometheus.CounterValue, float64(st.RefusedListCalls), "list")
	ch <- prometheus.MustNewConstMetric(callsRefusedDesc, prometheus.CounterValue, float64(st.RefusedOperatorCalls), "operator")
	ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(st.Connections))
	ch <- prometheus.MustNewConstMetric(connectionsRefusedDesc, prometheus.CounterValue, float64(st.RefusedConnections))
}

// LimitStats reports what the RPC layer's limits hold and have refused.
func (s *Server) LimitStats() rpc.LimitStats { return s.rpc.LimitStats() }
