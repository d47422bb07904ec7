package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// drainCheckInterval is how often the leader looks for drains that are
// over. A drain takes as long as its allocations take to stop, seconds at
// least, so a second of lag is not noticed.
const drainCheckInterval = time.Second

// drainer ends drains on the leader. Starting a drain makes the node
// ineligible and evaluates its jobs; the schedulers then move the
// allocations elsewhere. The drainer notices when none is left running on
// the node (or the deadline has passed) and ends the drain, leaving the
// node ineligible.
type drainer struct {
	s *Server
}

func (d *drainer) duty() LeaderDuty {
	var wg sync.WaitGroup
	return LeaderDuty{
		Name: "drainer",
		Start: func(ctx context.Context) error {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.run(ctx)
			}()
			return nil
		},
		Stop: wg.Wait,
	}
}

func (d *drainer) run(ctx context.Context) {
	ticker := time.NewTicker(drainCheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		snap := d.s.state.Snapshot()
		now := time.Now().UnixNano()
		for n := range snap.Nodes() {
			if n.GetDrainStrategy() == nil || !drainDone(snap, n, now) {
				continue
			}
			if err := d.complete(ctx, n, now); err != nil && ctx.Err() == nil && !errors.Is(err, state.ErrConflict) {
				d.s.logger.Warn("could not end a finished drain", "node", n.GetId(), "err", err)
			}
		}
	}
}

// drainDone reports whether a draining node has no allocation left that
// the drain must move (system jobs' ones are spared if the drain says so),
// or its deadline has passed.
func drainDone(snap *state.Snapshot, n *droverv1.Node, now int64) bool {
	ds := n.GetDrainStrategy()
	if ds.GetDeadline() > 0 && now >= ds.GetDeadline() {
		return true
	}
	allocs, _ := snap.AllocsByNode(n.GetId())
	for _, a := range allocs {
		if a.ClientTerminal() {
			continue
		}
		if ds.GetIgnoreSystemJobs() {
			if job := snap.JobVersion(a.GetJobId(), a.GetJobVersion()); job.GetType() == droverv1.JobType_JOB_TYPE_SYSTEM {
				continue
			}
		}
		return false
	}
	return true
}

// complete ends the drain of n, unless the node changed since it was read.
func (d *drainer) complete(ctx context.Context, n *droverv1.Node, now int64) error {
	_, _, err := d.s.Apply(ctx, droverv1.MessageTypeNodeDrain, &droverv1.NodeDrainEntry{
		NodeId:              n.GetId(),
		ExpectedModifyIndex: n.GetModifyIndex(),
		UpdatedAt:           now,
		Event:               &droverv1.NodeEvent{Message: "Node drain complete", Subsystem: "Drain", Time: now},
	})
	if err == nil {
		d.s.logger.Info("node drain complete", "node", n.GetId())
	}
	return err
}
