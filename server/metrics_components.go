package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// durationBuckets span 100µs to about 26s, for raft applies and
// scheduling steps alike.
var durationBuckets = prometheus.ExponentialBuckets(0.0001, 2, 19)

// instruments are the server's own histograms, made before the components
// that feed them.
type instruments struct {
	apply   *prometheus.HistogramVec
	entries *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	workers *workerMetrics
}

func newInstruments() *instruments {
	return &instruments{
		apply: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "drover_raft_apply_seconds", Help: "Time from proposing a raft entry to this server having applied it, by entry type.",
			Buckets: durationBuckets,
		}, []string{"type"}),
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_raft_entries_proposed_total", Help: "Raft entries this server proposed and saw applied, by type (the leader proposes them all).",
		}, []string{"type"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_raft_entry_bytes_proposed_total", Help: "Bytes of the raft entries this server proposed and saw applied, by type.",
		}, []string{"type"}),
		workers: newWorkerMetrics(),
	}
}

// observeApply records one raft apply of size bytes.
func (in *instruments) observeApply(msgType droverv1.MessageType, size int, d time.Duration) {
	typ := msgType.String()
	in.apply.WithLabelValues(typ).Observe(d.Seconds())
	in.entries.WithLabelValues(typ).Inc()
	in.bytes.WithLabelValues(typ).Add(float64(size))
}

func (in *instruments) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{in.apply, in.entries, in.bytes}, in.workers.collectors()...)
}

// workerMetrics implements worker.Observer with histograms.
type workerMetrics struct {
	dequeue, wait, process, submit *prometheus.HistogramVec
}

func newWorkerMetrics() *workerMetrics {
	h := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: durationBuckets}, labels)
	}
	return &workerMetrics{
		dequeue: h("drover_worker_dequeue_seconds", "Scheduler workers' Dequeue calls, by whether one brought an evaluation.", "outcome"),
		wait:    h("drover_worker_wait_for_state_seconds", "Scheduler workers' waits for the local state to reach an evaluation's index.", "outcome"),
		process: h("drover_worker_process_seconds", "Evaluations through their scheduler, plans included, by scheduler type.", "scheduler", "outcome"),
		submit:  h("drover_worker_plan_submit_seconds", "Plans' round trips from a worker to the leader's plan applier.", "outcome"),
	}
}

func (m *workerMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.dequeue, m.wait, m.process, m.submit}
}

func outcome(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// Dequeued implements worker.Observer.
func (m *workerMetrics) Dequeued(d time.Duration, got bool) {
	m.dequeue.WithLabelValues(outcome(got, "eval", "empty")).Observe(d.Seconds())
}

// WaitedForState implements worker.Observer.
func (m *workerMetrics) WaitedForState(d time.Duration, ok bool) {
	m.wait.WithLabelValues(outcome(ok, "reached", "behind")).Observe(d.Seconds())
}

// Processed implements worker.Observer.
func (m *workerMetrics) Processed(typ droverv1.JobType, d time.Duration, err error) {
	m.process.WithLabelValues(schedulerName(typ), outcome(err == nil, "ok", "error")).Observe(d.Seconds())
}

// PlanSubmitted implements worker.Observer.
func (m *workerMetrics) PlanSubmitted(d time.Duration, err error) {
	m.submit.WithLabelValues(outcome(err == nil, "ok", "error")).Observe(d.Seconds())
}

func schedulerName(t droverv1.JobType) string {
	switch t {
	case droverv1.JobType_JOB_TYPE_SERVICE:
		return "service"
	case droverv1.JobType_JOB_TYPE_BATCH:
		return "batch"
	case droverv1.JobType_JOB_TYPE_SYSTEM:
		return "system"
	}
	return "unknown"
}

// Scheduling metrics, read from the leader's components at scrape time.
var (
	brokerEvalsDesc = prometheus.NewDesc("drover_broker_evals",
		"Evaluations in the leader's eval broker, by state (0 on followers).", []string{"state"}, nil)
	blockedEvalsDesc = prometheus.NewDesc("drover_blocked_evals",
		"Blocked evaluations waiting for capacity; escaped ones are released by any capacity change.", []string{"kind"}, nil)
	planQueueDesc = prometheus.NewDesc("drover_plan_queue_depth",
		"Plans waiting for the leader's plan applier.", nil, nil)
	plansAppliedDesc = prometheus.NewDesc("drover_plans_applied_total",
		"Plans the plan applier committed while this server led.", nil, nil)
	plansRejectedDesc = prometheus.NewDesc("drover_plans_partially_rejected_total",
		"Plans of which the applier rejected some node, so the worker planned again.", nil, nil)
	planNodesRejectedDesc = prometheus.NewDesc("drover_plan_nodes_rejected_total",
		"Nodes of plans the applier rejected (what no longer fit).", nil, nil)
	planRelocatedDesc = prometheus.NewDesc("drover_plan_placements_relocated_total",
		"New placements the applier committed on an alternate node their scheduler ranked, because another plan filled their own.", nil, nil)
	blockingQueriesDesc = prometheus.NewDesc("drover_blocking_queries",
		"Blocking queries waiting for a change on this server, agents' GetAllocs among them.", nil, nil)
	allocWatchersDesc = prometheus.NewDesc("drover_getallocs_watchers",
		"Agents in a blocking Node.GetAllocs call on this server.", nil, nil)
)

// schedulingCollector reports the broker, blocked evaluations and plan
// queue, and the RPC layer's blocked queries.
type schedulingCollector struct {
	stats func() *droverv1.SchedulerStatsResponse
	rpc   *rpc.Server
}

// Describe implements prometheus.Collector.
func (c schedulingCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{brokerEvalsDesc, blockedEvalsDesc, planQueueDesc, plansAppliedDesc,
		plansRejectedDesc, planNodesRejectedDesc, planRelocatedDesc, blockingQueriesDesc, allocWatchersDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c schedulingCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	for state, v := range map[string]int32{"ready": st.GetReady(), "unacked": st.GetUnacked(), "pending": st.GetPending(),
		"delayed": st.GetDelayed(), "cancelable": st.GetCancelable(), "failed": st.GetFailed()} {
		gauge(brokerEvalsDesc, float64(v), state)
	}
	gauge(blockedEvalsDesc, float64(st.GetBlocked()-st.GetBlockedEscaped()), "by_class")
	gauge(blockedEvalsDesc, float64(st.GetBlockedEscaped()), "escaped")
	gauge(planQueueDesc, float64(st.GetPlanQueueDepth()))
	counter(plansAppliedDesc, st.GetPlansApplied())
	counter(plansRejectedDesc, st.GetPlansPartiallyRejected())
	counter(planNodesRejectedDesc, st.GetPlanNodesRejected())
	counter(planRelocatedDesc, st.GetPlanPlacementsRelocated())
	gauge(blockingQueriesDesc, float64(c.rpc.BlockedQueries()))
	gauge(allocWatchersDesc, float64(c.rpc.AllocWatchers()))
}
