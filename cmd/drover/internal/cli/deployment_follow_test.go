package cli

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/simagent"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestJobRunFollowsDeployment runs jobs against a server with simulated
// agents: job run follows each version's deployment to its end, exits 1
// when it fails, and stops following where canaries wait for promotion.
func TestJobRunFollowsDeployment(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t)
	addr := srv.RPCAddr()
	fleet, err := simagent.NewFleet(simagent.Config{Servers: []string{addr}, Nodes: simagent.DefaultTemplate().Nodes(3),
		StartDelay: 20 * time.Millisecond, HealthDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := fleet.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Stop)
	if err := waitNodesReady(t.Context(), fleet, 3); err != nil {
		t.Fatal(err)
	}
	// job writes a version of the job; unhealthy makes the agents report
	// its allocations unhealthy.
	job := func(memory, canary int, unhealthy bool) string {
		meta := ""
		if unhealthy {
			meta = `"meta": {"` + simagent.UnhealthyMetaKey + `": "1"},`
		}
		return writeJobFile(t, `{"id": "api", "datacenters": ["dc1"], `+meta+`
			"task_groups": [{"name": "app", "count": 3, "resources": {"cpu_mhz": 100, "memory_mb": `+strconv.Itoa(memory)+`},
			"update": {"max_parallel": 1, "canary": `+strconv.Itoa(canary)+`, "progress_deadline": "0s"}}]}`)
	}
	runJob := func(file string) (string, string, int) {
		out, stderr, err := run(t, "job", "run", "-address", addr, "-timeout", "60s", file)
		code, ok := ExitCode(err)
		if err != nil && !ok {
			code = 1 // what main exits with on any other error
		}
		return out, stderr, code
	}

	out, stderr, code := runJob(job(64, 0, false))
	if code != 0 || !strings.Contains(out, "==> Monitoring deployment") || !strings.Contains(out, "app: 3/3 healthy") ||
		!strings.Contains(out, "successful: Deployment completed successfully") {
		t.Fatalf("run of a new job: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	out, stderr, code = runJob(job(65, 0, true))
	if code != 1 || !strings.Contains(out, "failed: Failed due to unhealthy allocations") || !strings.Contains(stderr, "deploying job \"api\"") {
		t.Fatalf("run of an unhealthy version: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	out, stderr, code = runJob(job(66, 1, false))
	if code != 0 || !strings.Contains(out, "1 canaries awaiting promotion") || !strings.Contains(out, "drover deployment promote") {
		t.Fatalf("run of a version with a canary: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	// The canary waits for promotion; promote it, with -json.
	list, err := droverv1.NewDeploymentServiceClient(srv.Conn).List(t.Context(), &droverv1.ListDeploymentsRequest{JobId: "api"})
	if err != nil || len(list.GetDeployments()) == 0 {
		t.Fatalf("list deployments: %v", err)
	}
	var promoted struct {
		EvalID string `json:"eval_id"`
	}
	out, stderr, err = run(t, "deployment", "promote", "-address", addr, "-json", list.GetDeployments()[0].GetId())
	if err != nil || json.Unmarshal([]byte(out), &promoted) != nil || promoted.EvalID == "" {
		t.Fatalf("deployment promote -json: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	if out, _, err := run(t, "job", "run", "-address", addr, "-detach", job(67, 0, false)); err != nil || strings.Contains(out, "Monitoring") {
		t.Fatalf("run -detach: %v\n%s", err, out)
	}
	var registered struct {
		JobVersion string `json:"job_version"`
	}
	out, _, err = run(t, "job", "run", "-address", addr, "-json", job(68, 0, false))
	if err != nil || json.Unmarshal([]byte(out), &registered) != nil || registered.JobVersion != "4" || strings.Contains(out, "Monitoring") {
		t.Fatalf("run -json: %v\n%s", err, out)
	}
}
