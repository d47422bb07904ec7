package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestJobVersionCommandsAgainstServer runs validate, run -check-index,
// history and revert against a real server.
func TestJobVersionCommandsAgainstServer(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t)
	addr := srv.RPCAddr()
	v0 := writeJobFile(t, `{"id": "api", "datacenters": ["dc1"], "update": {"max_parallel": 2},
		"task_groups": [{"name": "app", "count": 1, "resources": {"cpu_mhz": 100, "memory_mb": 64}}]}`)
	v1 := writeJobFile(t, `{"id": "api", "datacenters": ["dc1"], "update": {"max_parallel": 2},
		"task_groups": [{"name": "app", "count": 4, "resources": {"cpu_mhz": 100, "memory_mb": 64}}]}`)
	bad := writeJobFile(t, `{"id": "api", "datacenters": ["dc1"],
		"task_groups": [{"name": "app", "count": 1, "resources": {"cpu_mhz": 100, "memory_mb": 64},
		"update": {"max_parallel": 0, "canary": 1, "healthy_deadline": "1m", "min_healthy_time": "2m"}}]}`)

	out, stderr, err := run(t, withAddr(addr, []string{"job", "validate"}, bad)...)
	if err == nil || !strings.Contains(out, "job.task_groups[0].update.canary: needs max_parallel") ||
		!strings.Contains(out, "job.task_groups[0].update.min_healthy_time: must be less than healthy_deadline") {
		t.Errorf("validate of an invalid job: err %v, stdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	out, _, err = run(t, withAddr(addr, []string{"job", "validate"}, v0)...)
	if err != nil || !strings.Contains(out, `Job "api" is valid`) {
		t.Errorf("validate of a valid job: err %v, stdout:\n%s", err, out)
	}
	out, _, err = run(t, withAddr(addr, []string{"job", "validate"}, "-json", v0)...)
	var answer struct {
		Job struct {
			TaskGroups []struct {
				Update map[string]any `json:"update"`
			} `json:"task_groups"`
		} `json:"job"`
	}
	if err != nil || json.Unmarshal([]byte(out), &answer) != nil || len(answer.Job.TaskGroups) != 1 ||
		answer.Job.TaskGroups[0].Update["healthy_deadline"] != "300s" {
		t.Errorf("validate -json: err %v, stdout:\n%s", err, out)
	}

	if out, stderr, err = run(t, withAddr(addr, []string{"job", "run", "-detach", "-check-index", "5"}, v0)...); err == nil ||
		!strings.Contains(stderr, "FailedPrecondition") {
		t.Errorf("run -check-index 5 of a new job: err %v, stdout %q, stderr %q", err, out, stderr)
	}
	if out, stderr, err = run(t, withAddr(addr, []string{"job", "run", "-detach", "-check-index", "0"}, v0)...); err != nil {
		t.Fatalf("run -check-index 0 of a new job: %v\n%s%s", err, out, stderr)
	}
	if out, stderr, err = run(t, withAddr(addr, []string{"job", "run", "-detach"}, v1)...); err != nil {
		t.Fatalf("run of version 1: %v\n%s%s", err, out, stderr)
	}

	out, _, err = run(t, withAddr(addr, []string{"job", "history"}, "-p", "api")...)
	if err != nil || !strings.Contains(out, "Version     = 1\nStable      = false") || !strings.Contains(out, "~ task_groups[app].count: 1 => 4") {
		t.Errorf("history -p: err %v, stdout:\n%s", err, out)
	}

	if out, stderr, err = run(t, withAddr(addr, []string{"job", "revert", "-detach", "-prior-version", "0"}, "api", "0")...); err == nil ||
		!strings.Contains(stderr, "is at version 1, not 0") {
		t.Errorf("revert with a wrong prior version: err %v, stdout %q, stderr %q", err, out, stderr)
	}
	out, stderr, err = run(t, withAddr(addr, []string{"job", "revert", "-detach", "-prior-version", "1"}, "api", "0")...)
	if err != nil || !strings.Contains(out, `Job "api" reverted to version 0, now version 2`) {
		t.Errorf("revert: err %v, stdout %q, stderr %q", err, out, stderr)
	}
}

// TestJobPlanCommandAgainstServer checks job plan's output and exit codes:
// 1 when allocations would change, 0 when none would, 255 on an error.
func TestJobPlanCommandAgainstServer(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t)
	addr := srv.RPCAddr()
	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	n := mock.Node()
	if _, err := nodes.Register(t.Context(), &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.UpdateStatus(t.Context(), &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
		Status: droverv1.NodeStatus_NODE_STATUS_READY}); err != nil {
		t.Fatal(err)
	}
	// No agent reports health here: the job is placed unpaced (max_parallel
	// 0), so that job run has no deployment to follow.
	file := writeJobFile(t, `{"id": "api", "datacenters": ["dc1"], "update": {"max_parallel": 0},
		"task_groups": [{"name": "app", "count": 2, "resources": {"cpu_mhz": 100, "memory_mb": 64}}]}`)

	out, _, err := run(t, withAddr(addr, []string{"job", "plan"}, file)...)
	if code, _ := ExitCode(err); code != 1 || !strings.Contains(out, `+ Job "api" (new)`) ||
		!strings.Contains(out, "drover job run -check-index 0 "+file) {
		t.Errorf("plan of a new job: exit code %d (%v), want 1; stdout:\n%s", code, err, out)
	}
	if out, stderr, err := run(t, withAddr(addr, []string{"job", "run"}, file)...); err != nil {
		t.Fatalf("run: %v\n%s%s", err, out, stderr)
	}
	out, _, err = run(t, withAddr(addr, []string{"job", "plan"}, file)...)
	if err != nil || !strings.Contains(out, `Job "api": specification unchanged`) {
		t.Errorf("plan of the job as it runs: %v, want exit code 0; stdout:\n%s", err, out)
	}
	huge := writeJobFile(t, `{"id": "api", "datacenters": ["dc1"],
		"task_groups": [{"name": "app", "count": 2, "resources": {"cpu_mhz": 100000, "memory_mb": 64}}]}`)
	out, _, err = run(t, withAddr(addr, []string{"job", "plan"}, huge)...)
	// The rollout replaces one allocation at a time (max_parallel 1), and
	// that one cannot be placed.
	if code, _ := ExitCode(err); code != 1 || !strings.Contains(out, `~ task_groups[app].resources.cpu_mhz: 100 => 100000`) ||
		!strings.Contains(out, "app         0      0     0         1        0       0        1") ||
		!strings.Contains(out, `Task Group "app" (failed to place 1 allocation)`) {
		t.Errorf("plan of a change that cannot be placed: exit code %d (%v), want 1; stdout:\n%s", code, err, out)
	}
	bad := writeJobFile(t, `{"id": "api", "datacenters": ["dc1"], "task_groups": [{"name": "app", "count": -1}]}`)
	_, stderr, err := run(t, withAddr(addr, []string{"job", "plan"}, bad)...)
	if code, _ := ExitCode(err); code != 255 || !strings.Contains(stderr, "job.task_groups[0].count") {
		t.Errorf("plan of an invalid job: exit code %d (%v), want 255; stderr:\n%s", code, err, stderr)
	}
}
