package server

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/drain"
)

// drainMarkBatch bounds the allocations one raft entry of the drainer
// marks, so that a forced drain of many full nodes stays in entries of
// bounded size.
const drainMarkBatch = 1000

// drainCheckInterval is how often the leader moves drains on. A drain
// takes as long as its allocations take to stop and their replacements to
// start, seconds at least, so a second of lag is not noticed.
const drainCheckInterval = time.Second

// drainer moves drains on, on the leader. Starting a drain makes the node
// ineligible; each round the drainer marks the allocations that may leave
// draining nodes now (drain.Decide) with an evaluation per job, which the
// schedulers then stop and replace elsewhere, and ends the drains that are
// over, leaving those nodes ineligible.
type drainer struct {
	s *Server
}

func (d *drainer) duty() LeaderDuty {
	return periodicDuty("drainer", drainCheckInterval, d.round)
}

// round runs one round over every draining node.
func (d *drainer) round(ctx context.Context) {
	snap := d.s.state.Snapshot()
	draining := slices.Collect(snap.DrainingNodes())
	if len(draining) == 0 {
		return
	}
	now := time.Now().UnixNano()
	plan := drain.Decide(snap, draining, now)
	if err := d.mark(ctx, snap, plan, now); err != nil {
		if ctx.Err() == nil {
			d.s.logger.Warn("could not mark allocations of draining nodes to migrate", "allocs", len(plan.Migrate), "err", err)
		}
		return
	}
	for _, n := range plan.Done {
		if err := d.complete(ctx, n, now); err != nil && ctx.Err() == nil && !errors.Is(err, state.ErrConflict) {
			d.s.logger.Warn("could not end a finished drain", "node", n.GetId(), "err", err)
		}
	}
}

// mark writes the plan's migrations, in entries of at most drainMarkBatch
// allocations, each with one evaluation per job it marks.
func (d *drainer) mark(ctx context.Context, snap *state.Snapshot, plan drain.Plan, now int64) error {
	for batch := range slices.Chunk(plan.Migrate, drainMarkBatch) {
		entry := &droverv1.AllocDesiredTransitionEntry{
			Transitions: make(map[string]*droverv1.DesiredTransition, len(batch)),
			UpdatedAt:   now,
		}
		evaluated := make(map[string]bool)
		for _, a := range batch {
			entry.Transitions[a.GetId()] = &droverv1.DesiredTransition{Migrate: true}
			if job := snap.JobByID(a.GetJobId()); job != nil && !evaluated[job.GetId()] {
				evaluated[job.GetId()] = true
				entry.Evals = append(entry.Evals, rpc.NewEval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_DRAIN, "", now))
			}
		}
		if _, _, err := d.s.Apply(ctx, droverv1.MessageTypeAllocTransition, entry); err != nil {
			return err
		}
	}
	return nil
}

// complete ends the drain of n, unless the node changed since it was read.
func (d *drainer) complete(ctx context.Context, n *droverv1.Node, now int64) error {
	_, _, err := d.s.Apply(ctx, droverv1.MessageTypeNodeDrain, &droverv1.NodeDrainEntry{
		NodeId:              n.GetId(),
		ExpectedModifyIndex: n.GetModifyIndex(),
		UpdatedAt:           now,
		Event:               &droverv1.NodeEvent{Message: droverv1.NodeEventDrainComplete, Subsystem: droverv1.NodeEventSubsystemDrain, Time: now},
	})
	if err == nil {
		d.s.logger.Info("node drain complete", "node", n.GetId())
	}
	return err
}
