package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestJobAndEvalCommandsAgainstServer runs the job and eval commands
// against a real server. Whether and where the scheduler places the job
// is not its business: it checks what the commands print for what the
// server has (the job registered, stopped; its evaluations).
func TestJobAndEvalCommandsAgainstServer(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t)
	addr := srv.RPCAddr()
	jobFile := writeJobFile(t, `{
		"id": "web",
		"datacenters": ["dc1"],
		"task_groups": [{
			"name": "frontend",
			"count": 2,
			"resources": {"cpu_mhz": 500, "memory_mb": 256},
			"max_client_disconnect": "5m",
			"reschedule_policy": {"attempts": 3, "interval": "10m", "delay": "15s", "delay_function": "DELAY_FUNCTION_CONSTANT"},
			"tasks": [{"name": "server", "driver": "exec", "config": {"command": "/bin/web"}}]
		}]
	}`)
	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		stdout, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v: error %v; stderr:\n%s", args, err, stderr)
		}
		if stderr != "" {
			t.Errorf("%v: stderr %q", args, stderr)
		}
		return stdout
	}
	registered := regexp.MustCompile(`^Job "web" registered at version (\d+)\nEvaluation ID: ([0-9a-f-]{36})\n$`)

	var evalID string
	t.Run("run -detach", func(t *testing.T) {
		out := mustRun(t, withAddr(addr, []string{"job", "run", "-detach", "-request-id", "first-run"}, jobFile)...)
		m := registered.FindStringSubmatch(out)
		if m == nil || m[1] != "0" {
			t.Fatalf("stdout:\n%s", out)
		}
		evalID = m[2]
		// The durations of the file reach the server in nanoseconds.
		resp, err := droverv1.NewJobServiceClient(srv.Conn).Get(context.Background(), &droverv1.GetJobRequest{JobId: "web"})
		if err != nil {
			t.Fatal(err)
		}
		tg := resp.GetJob().GetTaskGroups()[0]
		if tg.GetMaxClientDisconnect().AsDuration() != 5*time.Minute || tg.GetReschedulePolicy().GetInterval().AsDuration() != 10*time.Minute ||
			tg.GetReschedulePolicy().GetDelay().AsDuration() != 15*time.Second {
			t.Errorf("stored group %v", tg)
		}
	})
	if evalID == "" {
		t.FailNow()
	}
	t.Run("run again with the same request id", func(t *testing.T) {
		out := mustRun(t, withAddr(addr, []string{"job", "run", "-detach", "-request-id", "first-run"}, jobFile)...)
		if m := registered.FindStringSubmatch(out); m == nil || m[2] != evalID {
			t.Errorf("stdout:\n%s\nwant the first run's evaluation %s", out, evalID)
		}
	})
	t.Run("job status lists jobs", func(t *testing.T) {
		out := mustRun(t, withAddr(addr, []string{"job", "status"})...)
		lines := linesOf(out)
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID Type Priority Status Version Submit Date" {
			t.Fatalf("stdout:\n%s", out)
		}
		if f := strings.Fields(lines[1]); f[0] != "web" || f[1] != "service" || f[2] != "50" || f[4] != "0" {
			t.Errorf("job line %q", lines[1])
		}
	})
	t.Run("job status -json lists jobs", func(t *testing.T) {
		var resp struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, withAddr(addr, []string{"job", "status", "-json"})...)), &resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Jobs) != 1 || resp.Jobs[0].ID != "web" {
			t.Errorf("jobs %+v", resp.Jobs)
		}
	})
	t.Run("job status ID", func(t *testing.T) {
		out := mustRun(t, withAddr(addr, []string{"job", "status"}, "web")...)
		for key, want := range map[string]string{"ID": "web", "Name": "web", "Type": "service", "Priority": "50",
			"Datacenters": "dc1", "Version": "0", "Stop": "false"} {
			if got := field1(out, key); got != want {
				t.Errorf("%s = %q, want %q", key, got, want)
			}
		}
		if !regexp.MustCompile(`(?m)^frontend +2 +\d+ +\d+ +\d+ +\d+ +\d+ +\d+$`).MatchString(out) {
			t.Errorf("no summary line for group frontend with desired count 2:\n%s", out)
		}
		if !regexp.MustCompile(`(?m)^` + shortID(evalID) + ` +job-register +\w+ `).MatchString(out) {
			t.Errorf("no line for evaluation %s:\n%s", shortID(evalID), out)
		}
		for _, heading := range []string{"Summary", "Latest Evaluations", "Allocations"} {
			if !strings.Contains(out, "\n"+heading+"\n") {
				t.Errorf("no %s section:\n%s", heading, out)
			}
		}
	})
	t.Run("job status -json ID", func(t *testing.T) {
		var resp struct {
			Job struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"job"`
			Allocations []json.RawMessage `json:"allocations"`
			Evaluations []struct {
				ID string `json:"id"`
			} `json:"evaluations"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, withAddr(addr, []string{"job", "status", "-json"}, "web")...)), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Job.ID != "web" || !strings.HasPrefix(resp.Job.Status, "JOB_STATUS_") || resp.Allocations == nil {
			t.Errorf("got %+v", resp)
		}
		if !containsEval(resp.Evaluations, evalID) {
			t.Errorf("evaluations %+v lack %s", resp.Evaluations, evalID)
		}
	})
	t.Run("eval list", func(t *testing.T) {
		for _, flags := range [][]string{nil, {"-job", "web"}} {
			out := mustRun(t, withAddr(addr, []string{"eval", "list"}, flags...)...)
			if header := strings.Join(strings.Fields(linesOf(out)[0]), " "); header != "ID Priority Triggered By Job ID Type Status Placement Failures" {
				t.Errorf("%v: stdout:\n%s", flags, out)
			}
			if !regexp.MustCompile(`(?m)^` + shortID(evalID) + ` +50 +job-register +web +service +\w+ +(true|false)$`).MatchString(out) {
				t.Errorf("%v: no line for evaluation %s:\n%s", flags, shortID(evalID), out)
			}
		}
		if out := mustRun(t, withAddr(addr, []string{"eval", "list", "-job", "nope"})...); out != "No evaluations found\n" {
			t.Errorf("evaluations of an unknown job:\n%s", out)
		}
	})
	t.Run("eval list -json", func(t *testing.T) {
		var resp struct {
			Evaluations []struct {
				ID string `json:"id"`
			} `json:"evaluations"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, withAddr(addr, []string{"eval", "list", "-json", "-job", "web"})...)), &resp); err != nil {
			t.Fatal(err)
		}
		if !containsEval(resp.Evaluations, evalID) {
			t.Errorf("evaluations %+v lack %s", resp.Evaluations, evalID)
		}
	})
	t.Run("eval status", func(t *testing.T) {
		for _, id := range []string{evalID, shortID(evalID)} {
			out := mustRun(t, withAddr(addr, []string{"eval", "status"}, id)...)
			for key, want := range map[string]string{"ID": evalID, "Job ID": "web", "Type": "service",
				"Triggered By": "job-register", "Priority": "50"} {
				if got := field1(out, key); got != want {
					t.Errorf("eval status %s: %s = %q, want %q", id, key, got, want)
				}
			}
		}
		var resp struct {
			Evaluation struct {
				ID string `json:"id"`
			} `json:"evaluation"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, withAddr(addr, []string{"eval", "status", "-json"}, evalID)...)), &resp); err != nil || resp.Evaluation.ID != evalID {
			t.Errorf("got %+v, %v", resp, err)
		}
	})
	t.Run("stop -detach", func(t *testing.T) {
		out := mustRun(t, withAddr(addr, []string{"job", "stop", "-detach"}, "web")...)
		m := regexp.MustCompile(`^Job "web" stopped\nEvaluation ID: ([0-9a-f-]{36})\n$`).FindStringSubmatch(out)
		if m == nil || m[1] == evalID {
			t.Fatalf("stdout:\n%s", out)
		}
		status := mustRun(t, withAddr(addr, []string{"job", "status"}, "web")...)
		if field1(status, "Stop") != "true" || !strings.HasSuffix(field1(status, "Status"), " (stopped)") {
			t.Errorf("job status after stop:\n%s", status)
		}
		evals := mustRun(t, withAddr(addr, []string{"eval", "list", "-job", "web"})...)
		if !regexp.MustCompile(`(?m)^` + shortID(m[1]) + ` +50 +job-deregister +web `).MatchString(evals) {
			t.Errorf("no deregister evaluation %s:\n%s", shortID(m[1]), evals)
		}
	})
	t.Run("errors", func(t *testing.T) {
		invalid := writeJobFile(t, `{"id": "db", "datacenters": ["dc1"], "task_groups": [{"name": "db", "resources": {"cpu_mhz": 100}}]}`)
		tests := []struct {
			args       []string
			wantCode   codes.Code
			wantStderr string
		}{
			{[]string{"job", "status", "nope"}, codes.NotFound, `Error reading job "nope": job "nope": not found (NotFound)` + "\n"},
			{[]string{"job", "stop", "nope"}, codes.NotFound, `Error stopping job "nope": job "nope": not found (NotFound)` + "\n"},
			{[]string{"job", "run", invalid}, codes.InvalidArgument,
				`Error registering job "db": invalid request: job.task_groups[0].resources.memory_mb: must be positive (InvalidArgument)` + "\n"},
			{[]string{"eval", "status", "00000000-0000-4000-8000-000000000000"}, codes.NotFound,
				"Error reading evaluation 00000000-0000-4000-8000-000000000000: evaluation 00000000-0000-4000-8000-000000000000: not found (NotFound)\n"},
			{[]string{"eval", "status", "zz"}, codes.Unknown, `Error reading evaluation zz: no evaluation has an id starting with "zz"` + "\n"},
		}
		for _, tt := range tests {
			args := append(withAddr(addr, tt.args[:2]), tt.args[2:]...)
			stdout, stderr, err := run(t, args...)
			if err == nil || !Reported(err) {
				t.Errorf("%v: error %v, want a reported one", tt.args, err)
				continue
			}
			if got := status.Code(err); got != tt.wantCode {
				t.Errorf("%v: code %s, want %s", tt.args, got, tt.wantCode)
			}
			if stderr != tt.wantStderr {
				t.Errorf("%v: stderr:\n%q\nwant:\n%q", tt.args, stderr, tt.wantStderr)
			}
			if stdout != "" {
				t.Errorf("%v: stdout %q", tt.args, stdout)
			}
		}
	})
}

func containsEval(evals []struct {
	ID string `json:"id"`
}, id string) bool {
	for _, ev := range evals {
		if ev.ID == id {
			return true
		}
	}
	return false
}

// linesOf is out's lines.
func linesOf(out string) []string { return strings.Split(strings.TrimSuffix(out, "\n"), "\n") }

// field1 is the value of the "Key = value" line of out for key, or "".
func field1(out, key string) string {
	for _, l := range linesOf(out) {
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
