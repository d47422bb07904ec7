package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// followDeployment follows the deployment that rolls out the job version
// registered at jobModifyIndex, if there is one, printing each group's
// progress as it moves, until it ends or waits for an operator to promote
// its canaries. A failed or cancelled deployment is an error. -timeout and
// Ctrl-C end the wait; the deployment carries on.
func followDeployment(ctx context.Context, s *session, stdout io.Writer, jobID string, jobModifyIndex uint64) error {
	client := droverv1.NewDeploymentServiceClient(s.conn)
	d, err := deploymentOfVersion(ctx, client, jobID, jobModifyIndex)
	if status.Code(err) == codes.Unimplemented {
		return nil // a server from before deployments
	}
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("listing deployments of job %q", jobID), err)
	}
	if d == nil {
		return nil
	}
	fmt.Fprintf(stdout, "==> Monitoring deployment %q\n", shortID(d.GetId()))
	waitCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	last := ""
	var index uint64
	for {
		if line := deploymentProgress(d); line != last {
			fmt.Fprintf(stdout, "    %s\n", line)
			last = line
		}
		if d.GetStatus().Terminal() || awaitsOperator(d) {
			break
		}
		resp, err := client.Get(waitCtx, &droverv1.GetDeploymentRequest{DeploymentId: d.GetId(),
			Query: &droverv1.QueryOptions{MinIndex: index, MaxWait: durationpb.New(followPollWait)}})
		if err != nil {
			if ctx.Err() == nil && waitCtx.Err() != nil {
				err = context.Cause(waitCtx) // Ctrl-C
			}
			err = report(s.stderr, "following deployment "+d.GetId(), err, 0)
			fmt.Fprintf(s.stderr, "The deployment carries on: `drover deployment status %s` shows how it ends.\n", shortID(d.GetId()))
			return err
		}
		d = resp.GetDeployment()
		index = max(index, resp.GetMeta().GetIndex(), 1)
	}
	fmt.Fprintf(stdout, "==> Deployment %q %s: %s\n", shortID(d.GetId()), d.GetStatus().Name(), orNone(d.GetStatusDescription()))
	switch d.GetStatus() {
	case droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_CANCELLED:
		return report(s.stderr, fmt.Sprintf("deploying job %q", jobID),
			fmt.Errorf("deployment %s %s: %s", d.GetId(), d.GetStatus().Name(), orNone(d.GetStatusDescription())), 0)
	}
	if awaitsOperator(d) {
		fmt.Fprintf(stdout, "    Every canary is healthy: `drover deployment promote %s` goes on with the rollout.\n", shortID(d.GetId()))
	}
	return nil
}

// deploymentOfVersion returns the job's deployment of the version
// registered at jobModifyIndex, nil if none rolls it out.
func deploymentOfVersion(ctx context.Context, client droverv1.DeploymentServiceClient, jobID string, jobModifyIndex uint64) (*droverv1.Deployment, error) {
	resp, err := client.List(ctx, &droverv1.ListDeploymentsRequest{JobId: jobID})
	if err != nil {
		return nil, err
	}
	for _, d := range resp.GetDeployments() {
		if d.GetJobModifyIndex() == jobModifyIndex {
			return d, nil
		}
	}
	return nil, nil
}

// awaitsOperator reports whether a running deployment waits for an
// operator to promote canaries that are all healthy.
func awaitsOperator(d *droverv1.Deployment) bool {
	if d.GetStatus() != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING {
		return false
	}
	waiting := false
	for _, g := range d.GetGroups() {
		if g.GetDesiredCanaries() == 0 || g.GetPromoted() {
			continue
		}
		if g.GetAutoPromote() || g.GetHealthyAllocs() < g.GetDesiredCanaries() {
			return false
		}
		waiting = true
	}
	return waiting
}

// deploymentProgress is one line saying where each group stands.
func deploymentProgress(d *droverv1.Deployment) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(d.GetGroups())) {
		g := d.GetGroups()[name]
		part := fmt.Sprintf("%s: %d/%d healthy, %d placed", name, g.GetHealthyAllocs(), g.GetDesiredTotal(), g.GetPlacedAllocs())
		if n := g.GetUnhealthyAllocs(); n > 0 {
			part += fmt.Sprintf(", %d unhealthy", n)
		}
		if c := g.GetDesiredCanaries(); c > 0 && !g.GetPromoted() {
			part += fmt.Sprintf(", %d canaries awaiting promotion", c)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
