package server

import (
	"context"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/deploy"
)

// deployWatchInterval is how often the leader looks at the running
// deployments. An allocation's health takes seconds to be decided, so a
// quarter of a second of lag adds little to a rollout.
const deployWatchInterval = 250 * time.Millisecond

// deployer is the deployment watcher, a leader duty: each round it fails
// the deployments that must fail (reverting where asked), promotes those
// that promote by themselves, and writes an evaluation for each that made
// progress, all progress of a round in one raft entry.
type deployer struct {
	s       *Server
	watcher *deploy.Watcher
}

func (d *deployer) duty() LeaderDuty {
	return periodicDuty("deployment watcher", deployWatchInterval, d.round)
}

func (d *deployer) round(ctx context.Context) {
	if d.watcher == nil {
		d.watcher = deploy.NewWatcher()
	}
	snap := d.s.state.Snapshot()
	now := time.Now().UnixNano()
	dec := d.watcher.Decide(snap, now)
	for _, f := range dec.Fail {
		job := snap.JobByID(f.Deployment.GetJobId())
		if job == nil {
			continue
		}
		rv := rpc.RevertOnFailure(snap, f.Deployment, job, now)
		entry := &droverv1.DeploymentStatusUpdateEntry{UpdatedAt: now, Revert: rv.Entry,
			Updates: []*droverv1.DeploymentStatusUpdate{{DeploymentId: f.Deployment.GetId(),
				Status: droverv1.DeploymentStatus_DEPLOYMENT_STATUS_FAILED, StatusDescription: f.Description + rv.Note}}}
		if rv.Entry == nil {
			entry.Evals = append(entry.Evals, rpc.DeploymentEval(job, f.Deployment, now))
		}
		d.write(ctx, entry)
	}
	for _, dep := range dec.Promote {
		if job := snap.JobByID(dep.GetJobId()); job != nil {
			d.promote(ctx, &droverv1.DeploymentPromoteEntry{DeploymentId: dep.GetId(),
				Eval: rpc.DeploymentEval(job, dep, now), PromotedAt: now})
		}
	}
	if len(dec.Progress) == 0 {
		return
	}
	entry := &droverv1.DeploymentStatusUpdateEntry{UpdatedAt: now}
	for _, dep := range dec.Progress {
		if job := snap.JobByID(dep.GetJobId()); job != nil {
			entry.Evals = append(entry.Evals, rpc.DeploymentEval(job, dep, now))
		}
	}
	d.write(ctx, entry)
}

func (d *deployer) write(ctx context.Context, entry *droverv1.DeploymentStatusUpdateEntry) {
	if _, _, err := d.s.Apply(ctx, droverv1.MessageTypeDeploymentStatus, entry); err != nil && ctx.Err() == nil {
		d.s.logger.Warn("deployment watcher could not write", "updates", len(entry.GetUpdates()), "evals", len(entry.GetEvals()), "err", err)
		// Look again next round: what was not written is decided again.
		d.watcher = nil
	}
}

// promote promotes a deployment's canaries; the FSM checks again that each
// is healthy, and a refusal is decided again next round.
func (d *deployer) promote(ctx context.Context, entry *droverv1.DeploymentPromoteEntry) {
	if _, _, err := d.s.Apply(ctx, droverv1.MessageTypeDeploymentPromote, entry); err != nil && ctx.Err() == nil {
		d.s.logger.Warn("deployment watcher could not promote", "deployment", entry.GetDeploymentId(), "err", err)
	}
}
