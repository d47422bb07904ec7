package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

func TestSetConfigRequest(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	b := func(v bool) *bool { return &v }
	tests := []struct {
		name    string
		flags   setConfigFlags
		want    *droverv1.UpdateSchedulerWorkersRequest
		wantErr string
	}{
		{
			name:  "workers",
			flags: setConfigFlags{workers: 4, workersSet: true},
			want:  &droverv1.UpdateSchedulerWorkersRequest{NumWorkers: n(4)},
		},
		{
			name:  "zero workers",
			flags: setConfigFlags{workers: 0, workersSet: true},
			want:  &droverv1.UpdateSchedulerWorkersRequest{NumWorkers: n(0)},
		},
		{
			name:  "schedulers",
			flags: setConfigFlags{schedulers: " Service, batch"},
			want: &droverv1.UpdateSchedulerWorkersRequest{EnabledSchedulers: []droverv1.JobType{
				droverv1.JobType_JOB_TYPE_SERVICE, droverv1.JobType_JOB_TYPE_BATCH}},
		},
		{
			name:  "pause",
			flags: setConfigFlags{pause: true},
			want:  &droverv1.UpdateSchedulerWorkersRequest{Paused: b(true)},
		},
		{
			name:  "resume with workers",
			flags: setConfigFlags{resume: true, workers: 2, workersSet: true},
			want:  &droverv1.UpdateSchedulerWorkersRequest{Paused: b(false), NumWorkers: n(2)},
		},
		{name: "nothing", wantErr: "nothing to change: give -workers, -schedulers, -pause or -resume"},
		{name: "pause and resume", flags: setConfigFlags{pause: true, resume: true}, wantErr: "give at most one of -pause and -resume"},
		{name: "negative workers", flags: setConfigFlags{workers: -1, workersSet: true}, wantErr: "-workers -1: want 0 to 256"},
		{name: "too many workers", flags: setConfigFlags{workers: 1000, workersSet: true}, wantErr: "-workers 1000: want 0 to 256"},
		{name: "unknown scheduler", flags: setConfigFlags{schedulers: "service,sysbatch"}, wantErr: `-schedulers: unknown scheduler "sysbatch": want service, batch or system`},
		{name: "enum name", flags: setConfigFlags{schedulers: "JOB_TYPE_SERVICE"}, wantErr: `unknown scheduler "job_type_service"`},
		{name: "unspecified", flags: setConfigFlags{schedulers: "unspecified"}, wantErr: `unknown scheduler "unspecified"`},
		{name: "no name", flags: setConfigFlags{schedulers: " , "}, wantErr: `-schedulers: no scheduler named`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := tt.flags.request()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(req, tt.want) {
				t.Errorf("request %v, want %v", req, tt.want)
			}
		})
	}
}

func TestPrintWorkers(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	resp := &droverv1.SchedulerWorkersResponse{
		ServerId: "s1", NumWorkers: 2, Paused: true,
		EnabledSchedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE, droverv1.JobType_JOB_TYPE_SYSTEM},
		Workers: []*droverv1.SchedulerWorker{
			{Id: "s1-w0", Status: "scheduling", EvalId: evalID1, JobId: "web", StartedAt: now.Add(-90 * time.Second).UnixNano(), EvalsAcked: 12, EvalsNacked: 1},
			{Id: "s1-w1", Status: "paused", StartedAt: now.Add(-90 * time.Second).UnixNano()},
		},
	}
	tests := []struct {
		name string
		resp *droverv1.SchedulerWorkersResponse
		want string
	}{
		{
			name: "workers",
			resp: resp,
			want: `Server ID          = s1
Workers            = 2
Enabled Schedulers = service,system
Paused             = true

ID     Status      Eval ID   Job ID  Started    Acked  Nacked
s1-w0  scheduling  3f2a1b4c  web     1m30s ago  12     1
s1-w1  paused      -         -       1m30s ago  0      0
`,
		},
		{
			name: "none",
			resp: &droverv1.SchedulerWorkersResponse{ServerId: "s2"},
			want: `Server ID          = s2
Workers            = 0
Enabled Schedulers = <none>
Paused             = false

No workers running
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printWorkers(&buf, tt.resp, now); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}

func TestPrintSchedulerStats(t *testing.T) {
	st := &droverv1.SchedulerStatsResponse{
		Ready: 3, Unacked: 1, Pending: 2, Delayed: 4, Cancelable: 5, Failed: 6, Blocked: 7, BlockedEscaped: 1,
		ByScheduler: []*droverv1.BrokerQueueStats{
			{Scheduler: droverv1.JobType_JOB_TYPE_SERVICE, Ready: 2, Unacked: 1},
			{Scheduler: droverv1.JobType_JOB_TYPE_BATCH, Ready: 1},
		},
		PlanQueueDepth: 2, PlansApplied: 120, PlansPartiallyRejected: 3, PlanNodesRejected: 4,
	}
	want := `Eval Broker
Ready      = 3
Unacked    = 1
Pending    = 2
Delayed    = 4
Cancelable = 5
Failed     = 6

Scheduler  Ready  Unacked
service    2      1
batch      1      0

Blocked Evaluations
Blocked = 7
Escaped = 1

Plan Queue
Depth                    = 2
Plans Applied            = 120
Plans Partially Rejected = 3
Nodes Rejected           = 4
`
	var buf bytes.Buffer
	if err := printSchedulerStats(&buf, st); err != nil {
		t.Fatal(err)
	}
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestOperatorSchedulerAgainstServer(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t, func(cfg *server.Config) { cfg.Scheduler.NumWorkers = 2 })
	addr := srv.RPCAddr()
	workers := []string{"operator", "scheduler", "workers"}
	setConfig := []string{"operator", "scheduler", "set-config"}
	stats := []string{"operator", "scheduler", "stats"}

	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		stdout, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v: error %v; stderr:\n%s", args, err, stderr)
		}
		return stdout
	}
	wantLines := func(t *testing.T, out string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(out, l+"\n") {
				t.Errorf("output has no line %q:\n%s", l, out)
			}
		}
	}

	t.Run("workers", func(t *testing.T) {
		out := mustRun(t, withAddr(addr, workers)...)
		wantLines(t, out,
			"Server ID          = "+srv.ID(),
			"Workers            = 2",
			"Enabled Schedulers = service,batch,system",
			"Paused             = false")
		if !strings.Contains(out, "\nID  ") || strings.Count(out, "\n") != 4+2+2 {
			t.Errorf("want a table of 2 workers:\n%s", out)
		}
	})
	t.Run("workers -json", func(t *testing.T) {
		var resp struct {
			ServerID   string            `json:"server_id"`
			NumWorkers int               `json:"num_workers"`
			Workers    []json.RawMessage `json:"workers"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, withAddr(addr, workers, "-json")...)), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.ServerID != srv.ID() || resp.NumWorkers != 2 || len(resp.Workers) != 2 {
			t.Errorf("got %+v", resp)
		}
	})
	t.Run("set-config", func(t *testing.T) {
		out := mustRun(t, withAddr(addr, setConfig, "-workers", "1", "-schedulers", "service,batch", "-pause")...)
		wantLines(t, out,
			"Workers            = 1",
			"Enabled Schedulers = service,batch",
			"Paused             = true")
		out = mustRun(t, withAddr(addr, setConfig, "-resume")...)
		wantLines(t, out,
			"Workers            = 1",
			"Enabled Schedulers = service,batch",
			"Paused             = false")
		// What set-config did is what workers reads.
		wantLines(t, mustRun(t, withAddr(addr, workers)...), "Workers            = 1", "Enabled Schedulers = service,batch")
	})
	t.Run("set-config -json", func(t *testing.T) {
		var resp struct {
			NumWorkers int `json:"num_workers"`
		}
		out := mustRun(t, withAddr(addr, setConfig, "-workers", "2", "-json")...)
		if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.NumWorkers != 2 {
			t.Errorf("got %+v, %v from:\n%s", resp, err, out)
		}
	})
	t.Run("set-config usage errors", func(t *testing.T) {
		for _, flags := range [][]string{{}, {"-pause", "-resume"}, {"-schedulers", "cron"}, {"-workers", "many"}} {
			stdout, stderr, err := run(t, withAddr(addr, setConfig, flags...)...)
			if err == nil || Reported(err) || stdout != "" || !strings.Contains(stderr, "USAGE") {
				t.Errorf("%v: error %v, stdout %q, stderr:\n%s", flags, err, stdout, stderr)
			}
		}
	})
	t.Run("stats", func(t *testing.T) {
		out := mustRun(t, withAddr(addr, stats)...)
		for _, heading := range []string{"Eval Broker", "Blocked Evaluations", "Plan Queue"} {
			wantLines(t, out, heading)
		}
		if !strings.Contains(out, "\nReady ") || !strings.Contains(out, "\nPlans Applied ") {
			t.Errorf("stats without counters:\n%s", out)
		}
	})
	t.Run("stats -json", func(t *testing.T) {
		var resp map[string]any
		if err := json.Unmarshal([]byte(mustRun(t, withAddr(addr, stats, "-json")...)), &resp); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"ready", "unacked", "blocked", "by_scheduler", "plan_queue_depth", "plans_applied"} {
			if _, ok := resp[key]; !ok {
				t.Errorf("no %q in %v", key, resp)
			}
		}
	})
}
