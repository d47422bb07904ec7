package rpc

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// callLatencyBuckets span a node heartbeat (well under a millisecond) to
// a blocking query or a forwarded write held through an election.
var callLatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// newCallMetrics are the per-call metrics of go-grpc-middleware's
// Prometheus provider, under the names every gRPC dashboard knows:
// grpc_server_started_total, grpc_server_handled_total{grpc_code},
// grpc_server_msg_received_total, grpc_server_msg_sent_total and the
// grpc_server_handling_seconds histogram, each by grpc_service,
// grpc_method and grpc_type.
func newCallMetrics() *grpcprom.ServerMetrics {
	return grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(callLatencyBuckets)))
}

// CallMetrics is the collector of every call's count, code and latency,
// for the server's registry.
func (s *Server) CallMetrics() prometheus.Collector { return s.calls }

// ReadMetrics is the collector of consistent reads by where they were
// answered, for the server's registry.
func (s *Server) ReadMetrics() prometheus.Collector { return s.forward.reads.total }
