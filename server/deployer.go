package server

import (
	"context"
	"sync"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/deploy"
)

// deployWatchInterval is how long the deployment watcher waits at most
// between two looks, for the progress deadlines; deployBatchWindow is the
// least, so that health reports arriving close together (each agent
// reports its own) share one look and one raft entry.
const (
	deployWatchInterval = 250 * time.Millisecond
	deployBatchWindow   = 50 * time.Millisecond
)

// deployer is the deployment watcher, a leader duty: each round it fails
// the deployments that must fail (reverting where asked), promotes those
// that promote by themselves, and writes an evaluation for each that made
// progress, all progress of a round in one raft entry. It looks again as
// soon as the deployments change (a health report, a plan), so that a
// rollout's next batch waits for no timer.
type deployer struct {
	s       *Server
	watcher *deploy.Watcher
}

func (d *deployer) duty() LeaderDuty {
	var wg sync.WaitGroup
	return LeaderDuty{
		Name: "deployment watcher",
		Start: func(ctx context.Context) error {
			wg.Go(func() { d.run(ctx) })
			return nil
		},
		Stop: wg.Wait,
	}
}

// run looks at the deployments whenever their table changes, at most every
// deployBatchWindow and at least every deployWatchInterval.
func (d *deployer) run(ctx context.Context) {
	var seen uint64
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pause.C:
		}
		d.round(ctx)
		pause.Reset(deployBatchWindow)
		select {
		case <-ctx.Done():
			return
		case <-pause.C:
		}
		wait, cancel := context.WithTimeout(ctx, deployWatchInterval)
		seen, _ = d.s.state.BlockingQuery(wait, seen, func(snap *state.Snapshot) (uint64, error) {
			return snap.TableIndex(state.TableDeployments), nil
		})
		cancel()
		pause.Reset(0)
	}
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
