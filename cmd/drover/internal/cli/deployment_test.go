package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestDeploymentCommandsAgainstServer lists, shows, pauses, resumes and
// fails a deployment written as the scheduler would write it, and finds it
// in job status.
func TestDeploymentCommandsAgainstServer(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t)
	addr := srv.RPCAddr()
	ctx := context.Background()
	job := mock.Job(2)
	reg, err := droverv1.NewJobServiceClient(srv.Conn).Register(ctx, &droverv1.RegisterJobRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	// The deployment names the job's version and creation (a new job is
	// created at its modify index): the scheduler cancels one that rolls
	// out another version or an earlier job of the same id. It is applied
	// now: its progress deadline counts from then, and the deployment
	// watcher fails one whose deadline has passed.
	d := &droverv1.Deployment{Id: mock.ID(), JobId: job.GetId(), JobVersion: reg.GetJobVersion(),
		JobModifyIndex: reg.GetJobModifyIndex(), JobCreateIndex: reg.GetJobModifyIndex(),
		Groups: map[string]*droverv1.DeploymentGroup{"web": {DesiredTotal: 2, ProgressDeadline: durationpb.New(time.Minute)}}}
	if _, _, err := srv.Apply(ctx, droverv1.MessageTypePlanResult, &droverv1.PlanResultEntry{Deployment: d, AppliedAt: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	mustRun := func(args ...string) string {
		t.Helper()
		out, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, out, stderr)
		}
		return out
	}
	if out := mustRun(withAddr(addr, []string{"deployment", "list"})...); !strings.Contains(out, d.GetId()) || !strings.Contains(out, "running") {
		t.Errorf("deployment list:\n%s", out)
	}
	if out := mustRun(withAddr(addr, []string{"deployment", "pause"}, d.GetId())...); !strings.Contains(out, "pause done") {
		t.Errorf("deployment pause:\n%s", out)
	}
	if out := mustRun(withAddr(addr, []string{"deployment", "status"}, d.GetId())...); !strings.Contains(out, "Status      = paused") ||
		!strings.Contains(out, "web         -         2") {
		t.Errorf("deployment status of a paused deployment:\n%s", out)
	}
	if out := mustRun(withAddr(addr, []string{"deployment", "resume"}, d.GetId())...); !strings.Contains(out, "Evaluation ID:") {
		t.Errorf("deployment resume:\n%s", out)
	}
	if out := mustRun(withAddr(addr, []string{"job", "status"}, job.GetId())...); !strings.Contains(out, "Latest Deployment") ||
		!strings.Contains(out, "Status      = running") {
		t.Errorf("job status does not show the deployment:\n%s", out)
	}
	mustRun(withAddr(addr, []string{"deployment", "fail"}, d.GetId())...)
	_, stderr, err := run(t, withAddr(addr, []string{"deployment", "fail"}, d.GetId())...)
	if err == nil || !strings.Contains(stderr, "is failed") || !strings.Contains(stderr, "FailedPrecondition") {
		t.Errorf("failing a failed deployment: %v\n%s", err, stderr)
	}
}
