package loadgen

import (
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Scenario presets. Each returns a Config with the fleet, the steps and a
// timeout; the caller fills in Servers, MetricsURLs, DialOptions and
// Progress. scale multiplies the sizes (1 is the documented scenario);
// job ids carry a random run id, so presets can run again on one cluster.

// Per-allocation resources of the presets' jobs: 20 fit on a default
// simulated node (3,900 MHz, 7,936 MB free).
const (
	presetCPU      = 100
	presetMemoryMB = 128
	// presetStartDelay is how long a simulated allocation stays pending.
	presetStartDelay = time.Second
)

// C1MSmall is the small-cluster C1M scenario: 5,000 nodes and 100 service
// jobs of 1,000 allocations (100,000), submitted at once, waited on until
// every allocation runs.
func C1MSmall(scale float64) Config {
	nodes, jobs := scaled(5000, scale), scaled(100, scale)
	// 1,000 per job, fewer when rounding left more jobs than the scale
	// asks for, so that 20 allocations per node hold at any scale.
	perJob := min(1000, max(1, int(math.Round(100000*scale))/jobs))
	run := runID()
	st := Step{Name: "c1m", WaitRunning: true}
	for i := range jobs {
		st.Jobs = append(st.Jobs, presetJob(fmt.Sprintf("c1m-%s-%03d", run, i), droverv1.JobType_JOB_TYPE_SERVICE, int32(perJob)))
	}
	return Config{Fleet: runningFleet(nodes), Steps: []Step{st}, Timeout: 30 * time.Minute}
}

// C1MFull is the full C1M scenario: 1,000 service jobs of 1,000 small
// allocations (1,000,000, 200 per node) submitted at once on 5,000 nodes,
// waited on until every allocation runs. scale multiplies the jobs; the
// fleet stays 5,000 nodes.
func C1MFull(scale float64) Config {
	jobs := scaled(1000, scale)
	run := runID()
	st := Step{Name: "c1m-full", WaitRunning: true}
	for i := range jobs {
		j := presetJob(fmt.Sprintf("c1mf-%s-%04d", run, i), droverv1.JobType_JOB_TYPE_SERVICE, 1000)
		// 200 allocations must fit a default node (3,900 MHz and
		// 7,936 MB once its reservation is taken).
		j.TaskGroups[0].Resources.CpuMhz, j.TaskGroups[0].Resources.MemoryMb = 15, 30
		st.Jobs = append(st.Jobs, j)
	}
	return Config{Fleet: runningFleet(5000), Steps: []Step{st}, Timeout: 60 * time.Minute}
}

// Churn runs waves of batch jobs (20 jobs of 50 allocations each, running
// 10s) on 2,000 nodes while 10% of the nodes go silent for 40s every 90s
// and come back with their calls reordered. Servers whose heartbeat TTL
// plus grace exceed 40s see them disconnect without marking them down.
func Churn(scale float64) Config {
	nodes := scaled(2000, scale)
	fleet := runningFleet(nodes)
	fleet.BatchRunTime = 10 * time.Second
	fleet.Faults = simagent.Faults{Fraction: 0.1, Every: 90 * time.Second, Offline: 40 * time.Second, ReorderOnReturn: true}
	run := runID()
	var steps []Step
	for w := range 12 {
		st := Step{Name: fmt.Sprintf("wave-%02d", w), WaitRunning: true, Hold: 10 * time.Second}
		for i := range 20 {
			st.Jobs = append(st.Jobs, presetJob(fmt.Sprintf("churn-%s-%02d-%02d", run, w, i), droverv1.JobType_JOB_TYPE_BATCH, int32(scaled(50, scale))))
		}
		steps = append(steps, st)
	}
	return Config{Fleet: fleet, Steps: steps, Timeout: 30 * time.Minute}
}

// ScaleUpDown scales one service job from 0 to 20,000 allocations on 2,000
// nodes, then back to 0.
func ScaleUpDown(scale float64) Config {
	id := "scale-" + runID()
	up := presetJob(id, droverv1.JobType_JOB_TYPE_SERVICE, int32(scaled(20000, scale)))
	down := presetJob(id, droverv1.JobType_JOB_TYPE_SERVICE, 0)
	return Config{
		Fleet: runningFleet(scaled(2000, scale)),
		Steps: []Step{
			{Name: "scale-up", Jobs: []*droverv1.Job{up}, WaitRunning: true},
			{Name: "scale-down", Jobs: []*droverv1.Job{down}, WaitRunning: true},
		},
		Timeout: 30 * time.Minute,
	}
}

// Concurrent compares one job with many at once on 5,000 nodes: a job of
// 10,000 allocations, then 20 jobs of 500 submitted together, each step
// waited on until every allocation runs. Concurrent evaluations place on
// the same nodes from the same state, so the applier refuses the later of
// two plans that both filled a node; the second step's placements/s
// against the first's, and its rejected plans per 1,000 placements, show
// what that costs.
func Concurrent(scale float64) Config {
	run := runID()
	one := Step{Name: "one-job", WaitRunning: true,
		Jobs: []*droverv1.Job{presetJob("one-"+run, droverv1.JobType_JOB_TYPE_SERVICE, int32(scaled(10000, scale)))}}
	many := Step{Name: "20-jobs", WaitRunning: true}
	for i := range 20 {
		many.Jobs = append(many.Jobs, presetJob(fmt.Sprintf("many-%s-%02d", run, i), droverv1.JobType_JOB_TYPE_SERVICE, int32(scaled(500, scale))))
	}
	return Config{Fleet: runningFleet(scaled(5000, scale)), Steps: []Step{one, many}, Timeout: 30 * time.Minute}
}

// Heartbeats registers nodes heartbeat-only agents (no GetAllocs, no jobs)
// whose heartbeats are spread as in a fleet long running, and holds them
// for a minute.
func Heartbeats(nodes int) Config {
	fleet := simagent.Config{Nodes: simagent.DefaultTemplate().Nodes(nodes), HeartbeatOnly: true, SpreadHeartbeats: true}
	return Config{
		Fleet:   fleet,
		Steps:   []Step{{Name: "heartbeats", Hold: time.Minute}},
		Timeout: 30 * time.Minute,
	}
}

// runningFleet is a fleet of default nodes whose agents run allocations.
func runningFleet(nodes int) simagent.Config {
	return simagent.Config{Nodes: simagent.DefaultTemplate().Nodes(nodes), StartDelay: presetStartDelay}
}

// presetJob is a job of one group of count small allocations with a
// dynamic port, in the default template's datacenter.
func presetJob(id string, typ droverv1.JobType, count int32) *droverv1.Job {
	j := &droverv1.Job{
		Id:          id,
		Type:        typ,
		Datacenters: []string{"dc1"},
		TaskGroups: []*droverv1.TaskGroup{{
			Name:      "work",
			Count:     count,
			Resources: &droverv1.Resources{CpuMhz: presetCPU, MemoryMb: presetMemoryMB, Ports: []*droverv1.Port{{Label: "http"}}},
			Tasks:     []*droverv1.Task{{Name: "main", Driver: "exec", Config: map[string]string{"command": "/bin/work"}}},
		}},
	}
	j.Canonicalize()
	return j
}

// scaled is n·scale rounded, at least 1.
func scaled(n int, scale float64) int {
	return max(1, int(math.Round(float64(n)*scale)))
}

// runID tells one run's jobs from another's.
func runID() string { return uuid.NewString()[:8] }
