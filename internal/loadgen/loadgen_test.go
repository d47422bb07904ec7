package loadgen

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestSumFamilies(t *testing.T) {
	const text = `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
process_resident_memory_bytes 1.2345e+08
drover_raft_entry_bytes_proposed_total{type="JobRegister"} 1000
drover_raft_entry_bytes_proposed_total{type="PlanResult",note="a b}"} 250 1700000000000
drover_raft_entry_bytes_proposed_totalx 7
drover_plans_applied_total 3
`
	got, err := sumFamilies(strings.NewReader(text), metricCPU, metricRSS, metricRaftBytes)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{metricCPU: 12.5, metricRSS: 1.2345e8, metricRaftBytes: 1250}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %g, want %g", k, got[k], v)
		}
	}
	if _, err := sumFamilies(strings.NewReader("process_cpu_seconds_total abc\n"), metricCPU); err == nil {
		t.Error("a bad value gave no error")
	}
}

func TestProgressOf(t *testing.T) {
	const since = int64(1000)
	alloc := func(desired droverv1.AllocDesiredStatus, client droverv1.AllocClientStatus, modified int64) *droverv1.Allocation {
		return &droverv1.Allocation{DesiredStatus: desired, ClientStatus: client, ModifyTime: modified}
	}
	run, stop := droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP
	pending, running := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	complete, lost := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
	job := func(typ droverv1.JobType, count int32) *droverv1.Job {
		return &droverv1.Job{Type: typ, TaskGroups: []*droverv1.TaskGroup{{Count: count}}}
	}
	service, batch := droverv1.JobType_JOB_TYPE_SERVICE, droverv1.JobType_JOB_TYPE_BATCH
	tests := []struct {
		name    string
		job     *droverv1.Job
		stopped bool
		allocs  []*droverv1.Allocation
		want    jobProgress
		done    bool
	}{
		{name: "all running", job: job(service, 2), allocs: []*droverv1.Allocation{alloc(run, running, 1500), alloc(run, running, 900)},
			want: jobProgress{Wanted: 2, Reached: 2, SettledAt: 1500}, done: true},
		{name: "one pending", job: job(service, 2), allocs: []*droverv1.Allocation{alloc(run, running, 1500), alloc(run, pending, 1600)},
			want: jobProgress{Wanted: 2, Reached: 1, SettledAt: 1600}},
		{name: "not placed yet", job: job(service, 2), want: jobProgress{Wanted: 2}},
		{name: "scaled to zero, not yet stopped", job: job(service, 0), allocs: []*droverv1.Allocation{alloc(run, running, 900)},
			want: jobProgress{Reached: 1}},
		{name: "scaled to zero, stopping", job: job(service, 0), allocs: []*droverv1.Allocation{alloc(stop, running, 1200)},
			want: jobProgress{Lingering: 1, SettledAt: 1200}},
		{name: "scaled to zero, stopped", job: job(service, 0), allocs: []*droverv1.Allocation{alloc(stop, complete, 1300)},
			want: jobProgress{SettledAt: 1300}, done: true},
		{name: "deregistered, eval not run", job: job(service, 1), stopped: true, allocs: []*droverv1.Allocation{alloc(run, running, 900)},
			want: jobProgress{Lingering: 1}},
		{name: "batch complete with a lost one replaced", job: job(batch, 2),
			allocs: []*droverv1.Allocation{alloc(run, complete, 1100), alloc(run, lost, 1200), alloc(run, complete, 1400)},
			want:   jobProgress{Batch: true, Wanted: 2, Reached: 2, SettledAt: 1400}, done: true},
		{name: "batch running", job: job(batch, 1), allocs: []*droverv1.Allocation{alloc(run, running, 1100)},
			want: jobProgress{Batch: true, Wanted: 1, SettledAt: 1100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := progressOf(tt.job, tt.stopped, tt.allocs, since)
			if got != tt.want || got.done() != tt.done {
				t.Errorf("progressOf = %+v (done %v), want %+v (done %v)", got, got.done(), tt.want, tt.done)
			}
		})
	}
}

func TestEvalsDone(t *testing.T) {
	ev := func(idx uint64, st droverv1.EvalStatus) *droverv1.Evaluation {
		return &droverv1.Evaluation{CreateIndex: idx, Status: st}
	}
	evals := []*droverv1.Evaluation{
		ev(5, droverv1.EvalStatus_EVAL_STATUS_COMPLETE), ev(10, droverv1.EvalStatus_EVAL_STATUS_COMPLETE),
		ev(11, droverv1.EvalStatus_EVAL_STATUS_BLOCKED), ev(12, droverv1.EvalStatus_EVAL_STATUS_PENDING),
		ev(20, droverv1.EvalStatus_EVAL_STATUS_COMPLETE),
	}
	for _, tt := range []struct {
		after, upTo uint64
		complete    int
		pending     bool
	}{{0, 100, 3, true}, {5, 10, 1, false}, {10, 12, 0, true}, {12, math.MaxUint64, 1, false}} {
		if n, p := evalsDone(evals, tt.after, tt.upTo); n != tt.complete || p != tt.pending {
			t.Errorf("evalsDone(%d, %d) = %d, %v; want %d, %v", tt.after, tt.upTo, n, p, tt.complete, tt.pending)
		}
	}
}

func TestTotal(t *testing.T) {
	tests := []struct {
		name  string
		steps []StepReport
		want  StepReport
	}{
		{name: "no steps", want: StepReport{Name: "total"}},
		{
			// The first step holds 2s after its goal and the second starts
			// 2s after that hold: the total spans both gaps.
			name: "holds and gaps count",
			steps: []StepReport{
				{StartSeconds: 5, Seconds: 10, HeldSeconds: 12, Placements: 1000, PlacementsPerSecond: 200, SettledSeconds: 8,
					Evals: 10, RaftEntries: 5, RaftBytes: 100, Heartbeats: 360, CPUSeconds: []float64{1, 2}, ServerCPUSeconds: 3,
					Writes: 2000, PlansApplied: 20, PlansPartlyRejected: 3, PlacementsRelocated: 40,
					workers: workerTimes{EvalSeconds: 3, Evals: 10, PlanSeconds: 1, Plans: 5}},
				{StartSeconds: 19, Seconds: 4, HeldSeconds: 6, Placements: 400, PlacementsPerSecond: 200, SettledSeconds: 2,
					Evals: 8, RaftEntries: 2, RaftBytes: 50, Heartbeats: 180, CPUSeconds: []float64{0.5, 0.5}, ServerCPUSeconds: 1,
					Writes: 500, PlansApplied: 10, PlansPartlyRejected: 4, PlacementsRelocated: 2,
					workers: workerTimes{EvalSeconds: 1.5, Evals: 5, PlanSeconds: 2, Plans: 5}},
			},
			// CPU per placement 4 s / 1,400, per write 4 s / 2,500; 7
			// rejected plans per 1,400 placements; 4.5 s over 15
			// evaluations, 3 s over 10 plans' answers.
			want: StepReport{Name: "total", StartSeconds: 5, Seconds: 18, HeldSeconds: 20,
				Placements: 1400, PlacementsPerSecond: 87.5, SettledSeconds: 16, Evals: 18, EvalsPerSecond: 1,
				RaftEntries: 7, RaftBytes: 150, Heartbeats: 540, HeartbeatsPerSecond: 30, CPUSeconds: []float64{1.5, 2.5},
				ServerCPUSeconds: 4, Writes: 2500, CPUMillisPerPlacement: 4e3 / 1400.0, CPUMicrosPerWrite: 1600,
				PlansApplied: 30, PlansPartlyRejected: 7, RejectedPlansPer1000: 5, PlacementsRelocated: 42,
				EvalSecondsMean: 4.5 / 15.0, PlanAnswerSecondsMean: 0.3,
				workers: workerTimes{EvalSeconds: 4.5, Evals: 15, PlanSeconds: 3, Plans: 10}},
		},
		{
			// A step that places nothing and waits for no allocations
			// moves neither the last placement nor the settling time.
			name: "last step neither places nor settles",
			steps: []StepReport{
				{StartSeconds: 0, Seconds: 10, HeldSeconds: 10, Placements: 100, PlacementsPerSecond: 20, SettledSeconds: 8, Heartbeats: 100},
				{StartSeconds: 20, Seconds: 5, HeldSeconds: 10, Evals: 5, Heartbeats: 100},
			},
			want: StepReport{Name: "total", Seconds: 25, HeldSeconds: 30, Placements: 100, PlacementsPerSecond: 20,
				SettledSeconds: 8, Evals: 5, EvalsPerSecond: 0.2, Heartbeats: 200, HeartbeatsPerSecond: 10},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := total(tt.steps); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("total =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	nodes := simagent.DefaultTemplate().Nodes(1)
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "ok", cfg: Config{Servers: []string{"a"}, Fleet: simagent.Config{Nodes: nodes}, Steps: []Step{{Hold: time.Second}}}},
		{name: "no servers", cfg: Config{Fleet: simagent.Config{Nodes: nodes}}, wantErr: "no server addresses"},
		{name: "metrics mismatch", cfg: Config{Servers: []string{"a", "b"}, MetricsURLs: []string{"u"}, Fleet: simagent.Config{Nodes: nodes}}, wantErr: "1 metrics URLs for 2 servers"},
		{name: "no nodes", cfg: Config{Servers: []string{"a"}}, wantErr: "no nodes"},
		{name: "empty step", cfg: Config{Servers: []string{"a"}, Fleet: simagent.Config{Nodes: nodes}, Steps: []Step{{Name: "x"}}}, wantErr: "step 0 (x) does nothing"},
		{name: "job without id", cfg: Config{Servers: []string{"a"}, Fleet: simagent.Config{Nodes: nodes}, Steps: []Step{{Name: "x", Jobs: []*droverv1.Job{{}}}}}, wantErr: "job without id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.withDefaults().validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPresets(t *testing.T) {
	for _, tt := range []struct {
		name          string
		cfg           Config
		nodes, allocs int
	}{
		{"c1m", C1MSmall(1), 5000, 100000},
		{"c1m small", C1MSmall(0.01), 50, 1000},
		{"c1m tiny", C1MSmall(0.002), 10, 200},
		{"scale", ScaleUpDown(1), 2000, 20000},
		{"churn", Churn(1), 2000, 12 * 20 * 50},
		{"heartbeats", Heartbeats(100), 100, 0},
	} {
		allocs := 0
		for _, st := range tt.cfg.Steps {
			for _, j := range st.Jobs {
				if tt.name == "scale" && st.Name == "scale-down" {
					continue
				}
				allocs += int(j.GetTaskGroups()[0].GetCount())
			}
		}
		cfg := tt.cfg
		cfg.Servers = []string{"a"}
		if err := cfg.withDefaults().validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		if len(tt.cfg.Fleet.Nodes) != tt.nodes || allocs != tt.allocs {
			t.Errorf("%s: %d nodes, %d allocations; want %d, %d", tt.name, len(tt.cfg.Fleet.Nodes), allocs, tt.nodes, tt.allocs)
		}
	}
}

func TestStateCheckInterval(t *testing.T) {
	tests := []struct {
		want  int
		every time.Duration
	}{
		{0, 10 * time.Second},
		{1, 10 * time.Second},
		{100_000, 10 * time.Second},
		{100_001, 20 * time.Second},
		{1_000_000, 100 * time.Second},
	}
	for _, tt := range tests {
		if got := stateCheckInterval(tt.want); got != tt.every {
			t.Errorf("stateCheckInterval(%d) = %s, want %s", tt.want, got, tt.every)
		}
	}
}
