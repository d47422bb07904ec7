package raftmetrics

import (
	"fmt"
	"strings"
	"testing"

	metrics "github.com/armon/go-metrics"
)

// recorded is one report as the next sink got it.
type recorded struct {
	kind, name string
	val        float32
	labels     string
}

type recordingSink struct{ got []recorded }

func (r *recordingSink) add(kind string, key []string, val float32, labels []metrics.Label) {
	var ls []string
	for _, l := range labels {
		ls = append(ls, l.Name+"="+l.Value)
	}
	r.got = append(r.got, recorded{kind, strings.Join(key, "_"), val, strings.Join(ls, ",")})
}
func (r *recordingSink) SetGauge(k []string, v float32) { r.add("gauge", k, v, nil) }
func (r *recordingSink) SetGaugeWithLabels(k []string, v float32, l []metrics.Label) {
	r.add("gauge", k, v, l)
}
func (r *recordingSink) EmitKey(k []string, v float32)     { r.add("key", k, v, nil) }
func (r *recordingSink) IncrCounter(k []string, v float32) { r.add("counter", k, v, nil) }
func (r *recordingSink) IncrCounterWithLabels(k []string, v float32, l []metrics.Label) {
	r.add("counter", k, v, l)
}
func (r *recordingSink) AddSample(k []string, v float32) { r.add("sample", k, v, nil) }
func (r *recordingSink) AddSampleWithLabels(k []string, v float32, l []metrics.Label) {
	r.add("sample", k, v, l)
}

func TestSinkRenames(t *testing.T) {
	key := func(s string) []string { return append([]string{"drover"}, strings.Split(s, ".")...) }
	for _, tc := range []struct {
		report func(Sink)
		want   recorded
	}{
		{func(s Sink) { s.AddSample(key("raft.commitTime"), 250) }, recorded{"sample", "drover_raft_commit_time_seconds", 0.25, ""}},
		{func(s Sink) { s.IncrCounter(key("raft.apply"), 3) }, recorded{"counter", "drover_raft_apply_total", 3, ""}},
		{func(s Sink) { s.IncrCounter(key("raft.state.candidate"), 1) }, recorded{"counter", "drover_raft_state_candidate_total", 1, ""}},
		{func(s Sink) { s.SetGauge(key("raft.commitNumLogs"), 7) }, recorded{"gauge", "drover_raft_commit_num_logs", 7, ""}},
		{func(s Sink) { s.SetGauge(key("raft.fsm.lastRestoreDuration"), 1500) }, recorded{"gauge", "drover_raft_fsm_last_restore_duration_seconds", 1.5, ""}},
		{func(s Sink) { s.SetGauge(key("raft.boltdb.freelistBytes"), 4096) }, recorded{"gauge", "drover_raft_boltdb_freelist_bytes", 4096, ""}},
		{func(s Sink) { s.AddSample(key("raft.boltdb.logSize"), 512) }, recorded{"sample", "drover_raft_boltdb_log_size_bytes", 512, ""}},
		{func(s Sink) { s.AddSample(key("raft.boltdb.logsPerBatch"), 4) }, recorded{"sample", "drover_raft_boltdb_logs_per_batch", 4, ""}},
		{func(s Sink) { s.AddSample(key("raft.boltdb.writeCapacity"), 900) }, recorded{"sample", "drover_raft_boltdb_write_capacity_per_second", 900, ""}},
		{func(s Sink) { s.AddSample(key("raft.thread.main.saturation"), 0.5) }, recorded{"sample", "drover_raft_thread_main_saturation_ratio", 0.5, ""}},
		{func(s Sink) { s.AddSample(key("raft.net.getRPCType"), 2) }, recorded{"sample", "drover_raft_net_get_rpc_type_seconds", 0.002, ""}},
		{func(s Sink) { s.AddSample(key("raft.replication.heartbeat"), 2) }, recorded{"sample", "drover_raft_replication_heartbeat_seconds", 0.002, ""}},
		{func(s Sink) { s.AddSample(key("raft.replication.heartbeat.s2"), 2) }, recorded{"sample", "drover_raft_replication_heartbeat_peer_seconds", 0.002, "peer_id=s2"}},
		{func(s Sink) { s.AddSample(key("raft.replication.appendEntries.rpc"), 1) }, recorded{"sample", "drover_raft_replication_append_entries_rpc_seconds", 0.001, ""}},
		{func(s Sink) { s.AddSample(key("raft.replication.appendEntries.rpc.s3"), 1) }, recorded{"sample", "drover_raft_replication_append_entries_rpc_peer_seconds", 0.001, "peer_id=s3"}},
		{func(s Sink) {
			s.AddSampleWithLabels(key("raft.net.rpcDecode"), 1, []metrics.Label{{Name: "rpcType", Value: "AppendEntries"}})
		}, recorded{"sample", "drover_raft_net_rpc_decode_seconds", 0.001, "rpc_type=AppendEntries"}},
		{func(s Sink) {
			s.IncrCounterWithLabels(key("raft.transition.heartbeat_timeout"), 1, []metrics.Label{{Name: "leader", Value: "s1"}})
		}, recorded{"counter", "drover_raft_transition_heartbeat_timeout_total", 1, "leader=s1"}},
	} {
		next := &recordingSink{}
		tc.report(Sink{Next: next})
		if len(next.got) != 1 || fmt.Sprint(next.got[0]) != fmt.Sprint(tc.want) {
			t.Errorf("got %v, want %v", next.got, tc.want)
		}
	}
}
