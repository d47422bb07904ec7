package rpc_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// deploy writes a deployment of the job's current version as a plan of the
// scheduler would.
func (e *env) deploy(job *droverv1.Job, autoRevert bool, canaries int32) *droverv1.Deployment {
	e.t.Helper()
	j, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: job.GetId()})
	if err != nil {
		e.t.Fatal(err)
	}
	d := &droverv1.Deployment{Id: mock.ID(), JobId: job.GetId(), JobVersion: j.GetJob().GetVersion(),
		JobCreateIndex: j.GetJob().GetCreateIndex(), JobModifyIndex: j.GetJob().GetJobModifyIndex(),
		Groups: map[string]*droverv1.DeploymentGroup{job.GetTaskGroups()[0].GetName(): {
			DesiredTotal: 1, DesiredCanaries: canaries, AutoRevert: autoRevert, ProgressDeadline: durationpb.New(time.Minute)}}}
	// Applied now: its progress deadline is a minute away, so the leader's
	// deployment watcher leaves it running while the test drives it.
	e.apply(droverv1.MessageTypePlanResult, &droverv1.PlanResultEntry{Deployment: d, AppliedAt: time.Now().UnixNano()})
	return d
}

func (e *env) deploymentStatus(id string) droverv1.DeploymentStatus {
	e.t.Helper()
	resp, err := droverv1.NewDeploymentServiceClient(e.srv.Conn).Get(e.ctx(), &droverv1.GetDeploymentRequest{DeploymentId: id})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetDeployment().GetStatus()
}

func TestDeploymentService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployments := droverv1.NewDeploymentServiceClient(e.srv.Conn)
	job := e.job(1)
	first := e.deploy(job, false, 0)
	e.apply(droverv1.MessageTypeDeploymentStatus, &droverv1.DeploymentStatusUpdateEntry{Updates: []*droverv1.DeploymentStatusUpdate{{
		DeploymentId: first.GetId(), Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL}}})

	changed := job.CloneVT()
	changed.TaskGroups[0].Resources.MemoryMb *= 2
	if _, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: changed}); err != nil {
		t.Fatal(err)
	}
	second := e.deploy(changed, true, 1)

	list, err := deployments.List(e.ctx(), &droverv1.ListDeploymentsRequest{JobId: job.GetId()})
	if err != nil || len(list.GetDeployments()) != 2 || list.GetDeployments()[0].GetId() != second.GetId() {
		t.Fatalf("list of the job's deployments: %v, %v; want both, newest first", list, err)
	}

	steps := []struct {
		name string
		call func() (*droverv1.DeploymentWriteResponse, error)
		code codes.Code
		want droverv1.DeploymentStatus
	}{
		{"resume a running deployment", func() (*droverv1.DeploymentWriteResponse, error) {
			return deployments.Pause(e.ctx(), &droverv1.PauseDeploymentRequest{DeploymentId: second.GetId()})
		}, codes.FailedPrecondition, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING},
		{"pause", func() (*droverv1.DeploymentWriteResponse, error) {
			return deployments.Pause(e.ctx(), &droverv1.PauseDeploymentRequest{DeploymentId: second.GetId(), Pause: true})
		}, codes.OK, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_PAUSED},
		{"promote a paused deployment", func() (*droverv1.DeploymentWriteResponse, error) {
			return deployments.Promote(e.ctx(), &droverv1.PromoteDeploymentRequest{DeploymentId: second.GetId()})
		}, codes.FailedPrecondition, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_PAUSED},
		{"resume", func() (*droverv1.DeploymentWriteResponse, error) {
			return deployments.Pause(e.ctx(), &droverv1.PauseDeploymentRequest{DeploymentId: second.GetId()})
		}, codes.OK, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING},
		{"promote without a healthy canary", func() (*droverv1.DeploymentWriteResponse, error) {
			return deployments.Promote(e.ctx(), &droverv1.PromoteDeploymentRequest{DeploymentId: second.GetId()})
		}, codes.FailedPrecondition, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING},
		{"fail, reverting", func() (*droverv1.DeploymentWriteResponse, error) {
			resp, err := deployments.Fail(e.ctx(), &droverv1.FailDeploymentRequest{DeploymentId: second.GetId()})
			if err == nil && (resp.RevertedToVersion == nil || resp.GetRevertedToVersion() != 0 || resp.GetEvalId() == "") {
				t.Errorf("fail answered %v, want a revert to version 0 with its evaluation", resp)
			}
			return resp, err
		}, codes.OK, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED},
		{"fail again", func() (*droverv1.DeploymentWriteResponse, error) {
			return deployments.Fail(e.ctx(), &droverv1.FailDeploymentRequest{DeploymentId: second.GetId()})
		}, codes.FailedPrecondition, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED},
	}
	for _, st := range steps {
		if _, err := st.call(); status.Code(err) != st.code {
			t.Fatalf("%s: %v, want %s", st.name, err, st.code)
		}
		if got := e.deploymentStatus(second.GetId()); got != st.want {
			t.Fatalf("%s: deployment %s, want %s", st.name, got, st.want)
		}
	}

	got, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: job.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetJob().GetVersion() != 2 || got.GetJob().GetTaskGroups()[0].GetResources().GetMemoryMb() != job.TaskGroups[0].GetResources().GetMemoryMb() {
		t.Errorf("after the revert the job is version %d with %d MB, want version 2 with version 0's %d MB",
			got.GetJob().GetVersion(), got.GetJob().GetTaskGroups()[0].GetResources().GetMemoryMb(), job.TaskGroups[0].GetResources().GetMemoryMb())
	}
	desc, err := deployments.Get(e.ctx(), &droverv1.GetDeploymentRequest{DeploymentId: second.GetId()})
	if err != nil || desc.GetDeployment().GetStatusDescription() != "Deployment marked as failed - rolling back to job version 0" {
		t.Errorf("status description %q (%v)", desc.GetDeployment().GetStatusDescription(), err)
	}

	for _, tt := range []struct {
		name string
		err  error
		code codes.Code
	}{
		{"unknown deployment", func() error {
			_, err := deployments.Get(e.ctx(), &droverv1.GetDeploymentRequest{DeploymentId: mock.ID()})
			return err
		}(), codes.NotFound},
		{"malformed id", func() error {
			_, err := deployments.Fail(e.ctx(), &droverv1.FailDeploymentRequest{DeploymentId: "nope"})
			return err
		}(), codes.InvalidArgument},
	} {
		if status.Code(tt.err) != tt.code {
			t.Errorf("%s: %v, want %s", tt.name, tt.err, tt.code)
		}
	}
}
