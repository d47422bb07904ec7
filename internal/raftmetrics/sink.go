// Package raftmetrics exports hashicorp/raft's and raft-boltdb's metrics to
// Prometheus under Prometheus' naming conventions. raft reports through
// go-metrics with camelCase keys, counters without _total, timings in
// milliseconds and some peers' ids inside the key; Sink renames each
// report on its way to go-metrics' Prometheus sink:
//
//	raft.commitTime (ms sample)          drover_raft_commit_time_seconds
//	raft.apply (counter)                 drover_raft_apply_total
//	raft.boltdb.logSize (bytes sample)   drover_raft_boltdb_log_size_bytes
//	raft.replication.heartbeat.s2        drover_raft_replication_heartbeat_peer_seconds{peer_id="s2"}
package raftmetrics

import (
	"strings"
	"unicode"

	metrics "github.com/armon/go-metrics"
)

// Sink renames raft's metrics and passes them to Next.
type Sink struct {
	Next metrics.MetricSink
}

var _ metrics.MetricSink = Sink{}

// SetGauge implements metrics.MetricSink.
func (s Sink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels implements metrics.MetricSink.
func (s Sink) SetGaugeWithLabels(key []string, val float32, labels []metrics.Label) {
	key, labels = peerLabel(key, labels)
	name, divisor := withUnit(key, gaugeUnit(key))
	s.Next.SetGaugeWithLabels(name, val/divisor, labels)
}

// EmitKey implements metrics.MetricSink; Prometheus has no such kind.
func (s Sink) EmitKey(key []string, val float32) { s.Next.EmitKey(snakeKey(key), val) }

// IncrCounter implements metrics.MetricSink.
func (s Sink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels implements metrics.MetricSink.
func (s Sink) IncrCounterWithLabels(key []string, val float32, labels []metrics.Label) {
	key, labels = peerLabel(key, labels)
	name := snakeKey(key)
	if name[len(name)-1] != "total" {
		name = append(name, "total")
	}
	s.Next.IncrCounterWithLabels(name, val, labels)
}

// AddSample implements metrics.MetricSink.
func (s Sink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels implements metrics.MetricSink.
func (s Sink) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	key, labels = peerLabel(key, labels)
	name, divisor := withUnit(key, sampleUnit(key))
	s.Next.AddSampleWithLabels(name, val/divisor, labels)
}

// unit is what a reported value measures.
type unit int

const (
	noUnit       unit = iota // a count
	milliseconds             // exported in seconds
	bytes
	ratio
	perSecond
)

// withUnit is the snake_case name with its unit's suffix, and what to
// divide the reported value by for the unit's base.
func withUnit(key []string, u unit) ([]string, float32) {
	name := snakeKey(key)
	switch u {
	case milliseconds:
		return append(name, "seconds"), 1000
	case bytes:
		if !strings.HasSuffix(name[len(name)-1], "bytes") {
			name = append(name, "bytes")
		}
	case ratio:
		name = append(name, "ratio")
	case perSecond:
		name = append(name, "per_second")
	}
	return name, 1
}

// sampleUnit: raft's samples are timings in milliseconds but for these.
func sampleUnit(key []string) unit {
	switch strings.Join(withoutService(key), ".") {
	case "raft.fsm.applyBatchNum", "raft.boltdb.logsPerBatch":
		return noUnit
	case "raft.boltdb.logSize", "raft.boltdb.logBatchSize":
		return bytes
	case "raft.boltdb.writeCapacity":
		return perSecond
	case "raft.thread.main.saturation", "raft.thread.fsm.saturation":
		return ratio
	}
	return milliseconds
}

// gaugeUnit: raft's gauges are counts but for these.
func gaugeUnit(key []string) unit {
	switch strings.Join(withoutService(key), ".") {
	case "raft.fsm.lastRestoreDuration":
		return milliseconds
	case "raft.boltdb.freelistBytes":
		return bytes
	}
	return noUnit
}

// withoutService drops the service name go-metrics puts first ("drover").
func withoutService(key []string) []string {
	for i, k := range key {
		if k == "raft" {
			return key[i:]
		}
	}
	return key
}

// peerLabel writes the labels in snake_case and moves a peer's id out of
// the key of raft's per-peer
// replication figures into a peer_id label, keeping the name stable and
// apart from the figure of all peers (replication.heartbeat against
// replication.heartbeat.peer{peer_id}).
func peerLabel(key []string, labels []metrics.Label) ([]string, []metrics.Label) {
	labels = snakeLabels(labels)
	k := withoutService(key)
	if len(k) < 4 || k[1] != "replication" {
		return key, labels
	}
	base := 3 // raft.replication.heartbeat
	if k[2] == "appendEntries" {
		base = 4 // raft.replication.appendEntries.rpc
	}
	if len(k) != base+1 {
		return key, labels
	}
	renamed := append(append([]string{}, key[:len(key)-1]...), "peer")
	return renamed, append(append([]metrics.Label{}, labels...), metrics.Label{Name: "peer_id", Value: k[base]})
}

// snakeLabels writes label names in snake_case (raft's net metrics label
// by "rpcType").
func snakeLabels(labels []metrics.Label) []metrics.Label {
	if len(labels) == 0 {
		return labels
	}
	out := make([]metrics.Label, len(labels))
	for i, l := range labels {
		out[i] = metrics.Label{Name: snakeCase(l.Name), Value: l.Value}
	}
	return out
}

// snakeKey writes every part of key in snake_case.
func snakeKey(key []string) []string {
	out := make([]string, len(key))
	for i, k := range key {
		out[i] = snakeCase(k)
	}
	return out
}

// snakeCase turns camelCase into snake_case, an acronym staying one word
// ("getRPCType" is "get_rpc_type").
func snakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			acronymEnd := i > 0 && unicode.IsUpper(r[i-1]) && i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || acronymEnd {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}
