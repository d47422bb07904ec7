package loadgen

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what a run measured. Durations are in seconds.
type Report struct {
	// Nodes is the size of the simulated fleet.
	Nodes int `json:"nodes"`
	// FleetReadySeconds is how long the fleet took to register and be
	// ready, before the first step.
	FleetReadySeconds float64 `json:"fleet_ready_seconds"`
	// Steps are the steps in order; Total sums them, its times and rates
	// running over the whole span of the steps from the first one's
	// start, gaps between steps and holds included.
	Steps []StepReport `json:"steps"`
	Total StepReport   `json:"total"`
	// UpdateAlloc and GetAllocs are the agents' call latencies over the
	// whole run (the fleet keeps one distribution per call).
	UpdateAlloc Latency `json:"update_alloc"`
	GetAllocs   Latency `json:"get_allocs"`
	// RaftEntries is the change of the cluster's applied index from
	// before the fleet registered until the end; RaftBytes the bytes of
	// the entries the servers proposed as leader in that time.
	RaftEntries uint64  `json:"raft_entries"`
	RaftBytes   float64 `json:"raft_bytes"`
	// Writes counts every write the servers acknowledged over the whole
	// run, the fleet's registration included (see StepReport.Writes);
	// CPUMicrosPerWrite divides the servers' CPU time over the run by it.
	Writes            uint64  `json:"writes"`
	CPUMicrosPerWrite float64 `json:"server_cpu_us_per_write"`
	// Servers are the per-server figures, in Config.Servers order.
	Servers []ServerReport `json:"servers"`
	// NodesByStatus and AllocsByStatus count the cluster's nodes and
	// allocations (by client status) at the end.
	NodesByStatus  map[string]int `json:"nodes_by_status"`
	AllocsByStatus map[string]int `json:"allocs_by_status"`
}

// StepReport is what one step measured.
type StepReport struct {
	Name string `json:"name"`
	// StartSeconds is when the step's first submission was made, in
	// seconds from the start of the run (before the fleet registered).
	StartSeconds float64 `json:"start_seconds"`
	// Seconds runs from the first submission until the goal was seen
	// reached (Hold not included).
	Seconds float64 `json:"seconds"`
	// HeldSeconds runs from the first submission until the end of Hold:
	// the time the step's raft, CPU, heartbeat and latency figures cover.
	HeldSeconds float64 `json:"held_seconds"`
	// Placements counts the allocations created during the step;
	// PlacementsPerSecond divides them by the time from the first
	// submission until the last of them was committed (its create time).
	Placements          int     `json:"placements"`
	PlacementsPerSecond float64 `json:"placements_per_second"`
	// SettledSeconds runs from the first submission until the last
	// allocation change the goal needed was committed: with WaitRunning,
	// the time until every allocation wanted is running.
	SettledSeconds float64 `json:"settled_seconds"`
	// Evals counts the evaluations of the run's jobs created during the
	// step that completed; EvalsPerSecond divides them by Seconds.
	Evals          int     `json:"evals"`
	EvalsPerSecond float64 `json:"evals_per_second"`
	// RaftEntries is the change of the applied index over the step
	// (Hold included), RaftBytes the bytes proposed.
	RaftEntries uint64  `json:"raft_entries"`
	RaftBytes   float64 `json:"raft_bytes"`
	// Heartbeats counts heartbeats the servers accepted during the step
	// (Hold included), HeartbeatsPerSecond per second of it (HeldSeconds;
	// for the total, per second of the steps' own HeldSeconds, since the
	// gaps between steps are counted by none).
	Heartbeats          uint64  `json:"heartbeats"`
	HeartbeatsPerSecond float64 `json:"heartbeats_per_second"`
	// CPUSeconds is each server's CPU time used during the step, in
	// Config.Servers order; ServerCPUSeconds their sum.
	CPUSeconds       []float64 `json:"cpu_seconds,omitempty"`
	ServerCPUSeconds float64   `json:"server_cpu_seconds"`
	// Writes counts the writes the servers acknowledged during the step
	// (Hold included): the agents' Node.Register and Node.UpdateAlloc
	// calls and the driver's job registrations and deregistrations.
	// Heartbeats are not counted: one that changes nothing is no write.
	Writes uint64 `json:"writes"`
	// CPUMillisPerPlacement and CPUMicrosPerWrite divide
	// ServerCPUSeconds by Placements and by Writes: what an allocation
	// costs the servers from placement until it runs (with WaitRunning),
	// and what a write costs them. Both are 0 without metrics URLs or
	// without placements or writes. These figures vary less from machine
	// to machine than the rates.
	CPUMillisPerPlacement float64 `json:"server_cpu_ms_per_placement"`
	CPUMicrosPerWrite     float64 `json:"server_cpu_us_per_write"`
	// PlansApplied counts the plans the leader's plan applier handled
	// during the step, PlansPartlyRejected those of them with a node
	// refused (the node had no room left for what another plan put
	// there first); RejectedPlansPer1000 puts the rejections per 1,000
	// placements.
	PlansApplied         uint64  `json:"plans_applied"`
	PlansPartlyRejected  uint64  `json:"plans_partly_rejected"`
	RejectedPlansPer1000 float64 `json:"rejected_plans_per_1000_placements"`
	// PlacementsRelocated counts the placements the applier committed on
	// an alternate node their scheduler ranked, their own having been
	// filled by another plan (a collision that cost no rejection).
	PlacementsRelocated uint64 `json:"placements_relocated"`
	// EvalSecondsMean is how long the servers' scheduler workers took on
	// average, during the step, to take an evaluation through its
	// scheduler once its state was there: the pass and the waits for its
	// plans' answers. PlanAnswerSecondsMean is the mean of those waits,
	// one plan's round trip to the leader's plan applier. Both are 0
	// without metrics URLs, or without evaluations or plans.
	EvalSecondsMean       float64 `json:"eval_seconds_mean"`
	PlanAnswerSecondsMean float64 `json:"plan_answer_seconds_mean"`
	// workers are the sums behind the two means, which the total adds.
	workers workerTimes
	// UpdateAlloc and GetAllocs are the agents' call latencies during the
	// step (Hold included).
	UpdateAlloc Latency `json:"update_alloc"`
	GetAllocs   Latency `json:"get_allocs"`
}

// Latency summarises one kind of agent call.
type Latency struct {
	Count      uint64  `json:"count"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// ServerReport is one server's resource use over the run.
type ServerReport struct {
	Addr string `json:"addr"`
	// CPUSeconds is the process CPU time used from before the fleet
	// registered until the end.
	CPUSeconds float64 `json:"cpu_seconds"`
	// MaxRSSBytes is the highest resident memory sampled (once a second).
	MaxRSSBytes float64 `json:"max_rss_bytes"`
	// AppliedIndex is the server's last applied raft index at the end.
	AppliedIndex uint64 `json:"applied_index"`
}

// String renders the report for a terminal.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Fleet: %d nodes, ready after %s\n", r.Nodes, secs(r.FleetReadySeconds))
	fmt.Fprintf(&b, "%-14s %9s %11s %9s %10s %7s %8s %9s %10s %9s %12s %11s %9s %8s %8s\n",
		"step", "time", "placements", "placed/s", "settled", "evals", "evals/s", "raft ent", "raft MB", "hb/s",
		"cpu ms/alloc", "cpu us/wr", "rej/1k", "eval ms", "plan ms")
	for _, s := range append(slices.Clone(r.Steps), r.Total) {
		fmt.Fprintf(&b, "%-14s %9s %11d %9.0f %10s %7d %8.1f %9d %10.1f %9.0f %12.3f %11.0f %9.1f %8.1f %8.1f\n",
			s.Name, secs(s.Seconds), s.Placements, s.PlacementsPerSecond, secs(s.SettledSeconds),
			s.Evals, s.EvalsPerSecond, s.RaftEntries, s.RaftBytes/1e6, s.HeartbeatsPerSecond,
			s.CPUMillisPerPlacement, s.CPUMicrosPerWrite, s.RejectedPlansPer1000,
			1e3*s.EvalSecondsMean, 1e3*s.PlanAnswerSecondsMean)
	}
	fmt.Fprintf(&b, "UpdateAlloc: %d calls, p50 %s, p99 %s\n", r.UpdateAlloc.Count, secs(r.UpdateAlloc.P50Seconds), secs(r.UpdateAlloc.P99Seconds))
	fmt.Fprintf(&b, "GetAllocs:   %d deliveries, p50 %s, p99 %s\n", r.GetAllocs.Count, secs(r.GetAllocs.P50Seconds), secs(r.GetAllocs.P99Seconds))
	fmt.Fprintf(&b, "Raft: %d entries, %.1f MB proposed\n", r.RaftEntries, r.RaftBytes/1e6)
	fmt.Fprintf(&b, "Writes: %d acknowledged, %.0f us of server CPU each over the whole run\n", r.Writes, r.CPUMicrosPerWrite)
	for _, s := range r.Servers {
		fmt.Fprintf(&b, "Server %s: CPU %.1f s, max RSS %.0f MB, applied index %d\n", s.Addr, s.CPUSeconds, s.MaxRSSBytes/(1<<20), s.AppliedIndex)
	}
	fmt.Fprintf(&b, "Nodes by status: %s\n", countsString(r.NodesByStatus, "NODE_STATUS_"))
	fmt.Fprintf(&b, "Allocations by status: %s\n", countsString(r.AllocsByStatus, "ALLOC_CLIENT_STATUS_"))
	return b.String()
}

// secs prints seconds as a rounded duration.
func secs(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// countsString prints counts as "ready 200, down 3", sorted by name.
func countsString(m map[string]int, prefix string) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(strings.TrimPrefix(k, prefix)), m[k]))
	}
	return strings.Join(parts, ", ")
}

// total sums the steps. Times run from the first step's start: Seconds
// until the last goal was reached, HeldSeconds until the last Hold ended,
// SettledSeconds until the last settled step settled; placements/s over
// the time until the last placement, evals/s over Seconds. Each step's
// StartSeconds places it in that span, so holds and the gaps between
// steps count.
func total(steps []StepReport) StepReport {
	t := StepReport{Name: "total"}
	if len(steps) == 0 {
		return t
	}
	t.StartSeconds = steps[0].StartSeconds
	var placing, heldSum float64
	for _, s := range steps {
		at := s.StartSeconds - t.StartSeconds // the step's offset in the span
		t.Placements += s.Placements
		t.Evals += s.Evals
		t.RaftEntries += s.RaftEntries
		t.RaftBytes += s.RaftBytes
		t.Heartbeats += s.Heartbeats
		heldSum += s.HeldSeconds
		if s.Placements > 0 && s.PlacementsPerSecond > 0 {
			placing = at + float64(s.Placements)/s.PlacementsPerSecond
		}
		if s.SettledSeconds > 0 {
			t.SettledSeconds = max(t.SettledSeconds, at+s.SettledSeconds)
		}
		t.Seconds = max(t.Seconds, at+s.Seconds)
		t.HeldSeconds = max(t.HeldSeconds, at+s.HeldSeconds)
		t.CPUSeconds = addCPU(t.CPUSeconds, s.CPUSeconds)
		t.ServerCPUSeconds += s.ServerCPUSeconds
		t.Writes += s.Writes
		t.PlansApplied += s.PlansApplied
		t.PlansPartlyRejected += s.PlansPartlyRejected
		t.PlacementsRelocated += s.PlacementsRelocated
		t.workers = t.workers.add(s.workers)
	}
	t.deriveCosts()
	if placing > 0 {
		t.PlacementsPerSecond = float64(t.Placements) / placing
	}
	if t.Seconds > 0 {
		t.EvalsPerSecond = float64(t.Evals) / t.Seconds
	}
	if heldSum > 0 {
		t.HeartbeatsPerSecond = float64(t.Heartbeats) / heldSum
	}
	return t
}

// addCPU adds a step's per-server CPU seconds to sum, growing it as needed.
func addCPU(sum, step []float64) []float64 {
	for i, c := range step {
		if i == len(sum) {
			sum = append(sum, 0)
		}
		sum[i] += c
	}
	return sum
}

// deriveCosts computes the per-placement and per-write figures from the
// step's sums.
func (s *StepReport) deriveCosts() {
	s.CPUMillisPerPlacement, s.CPUMicrosPerWrite, s.RejectedPlansPer1000 = 0, 0, 0
	if s.Placements > 0 {
		s.CPUMillisPerPlacement = 1e3 * s.ServerCPUSeconds / float64(s.Placements)
		s.RejectedPlansPer1000 = 1e3 * float64(s.PlansPartlyRejected) / float64(s.Placements)
	}
	if s.Writes > 0 {
		s.CPUMicrosPerWrite = 1e6 * s.ServerCPUSeconds / float64(s.Writes)
	}
	s.EvalSecondsMean, s.PlanAnswerSecondsMean = s.workers.means()
}
