package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// clusterMetadata is the leader duty that gives the cluster its identity:
// a random id and the time of creation, written once through raft as soon
// as every server in the raft configuration runs a release that knows the
// entry type. While some server is behind it writes nothing, says once
// which servers are behind (a warning once one has announced an older
// release; only a note while none has announced yet, as at every start),
// and waits for the servers table or the raft configuration to change. A leader whose own release does not know the
// type does nothing, as a server of that release would.
type clusterMetadata struct {
	s  *Server
	wg sync.WaitGroup
}

func (c *clusterMetadata) duty() LeaderDuty {
	return LeaderDuty{
		Name: "cluster metadata",
		Start: func(ctx context.Context) error {
			if knows(c.s.cfg.release(), droverv1.MessageTypeClusterMetadata) {
				c.wg.Go(func() { c.run(ctx) })
			}
			return nil
		},
		Stop: c.wg.Wait,
	}
}

// run writes the metadata unless the state has it, waiting for the servers
// to be upgraded first.
func (c *clusterMetadata) run(ctx context.Context) {
	const t = droverv1.MessageTypeClusterMetadata
	since, _ := t.Since()
	logged := ""
	delay := minRetryDelay
	for ctx.Err() == nil {
		// Taken before reading, so that a change after the read wakes
		// the wait below.
		changed := c.s.gate.changedCh()
		snap := c.s.state.Snapshot()
		if snap.ClusterMetadata() != nil {
			return
		}
		serversIndex := snap.TableIndex(state.TableServers)
		behind, err := c.s.gate.behind(t)
		if err == nil && len(behind) == 0 {
			if err = c.write(ctx); err == nil {
				return
			}
		}
		if len(behind) > 0 {
			if desc := describeServers(behind); desc != logged {
				if noneAnnounced(behind) {
					// Expected at every start: not worth a warning.
					c.s.logger.Info("waiting for every server to announce its release before writing the cluster metadata",
						"needs", since, "behind", desc)
				} else {
					c.s.logger.Warn("not writing the cluster metadata until every server runs a release that knows it; upgrade these servers",
						"needs", since, "behind", desc)
				}
				logged = desc
			}
			c.waitForChange(ctx, changed, serversIndex)
			delay = minRetryDelay
			continue
		}
		if ctx.Err() == nil {
			c.s.logger.Warn("could not write the cluster metadata; retrying", "retry_in", delay, "err", err)
		}
		sleep(ctx, delay)
		delay = min(2*delay, maxRetryDelay)
	}
}

// write proposes new metadata. The state store keeps the first metadata
// applied, which may be another leader's.
func (c *clusterMetadata) write(ctx context.Context) error {
	entry := &droverv1.ClusterMetadataEntry{Metadata: &droverv1.ClusterMetadata{
		ClusterId: uuid.NewString(),
		CreatedAt: time.Now().UnixNano(),
	}}
	index, resp, err := c.s.Apply(ctx, droverv1.MessageTypeClusterMetadata, entry)
	if err != nil {
		return err
	}
	m, ok := resp.(*droverv1.ClusterMetadata)
	if !ok {
		return fmt.Errorf("cluster metadata entry at index %d: unexpected apply response %T", index, resp)
	}
	c.s.logger.Info("cluster metadata written", "cluster_id", m.GetClusterId(), "index", m.GetCreateIndex())
	return nil
}

// waitForChange returns when the raft configuration changes (changed is
// closed), the servers table is written after serversIndex, or ctx ends.
func (c *clusterMetadata) waitForChange(ctx context.Context, changed <-chan struct{}, serversIndex uint64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-changed:
			cancel()
		case <-ctx.Done():
		}
	}()
	// BlockingQuery returns at once for a minimum index of zero (an empty
	// servers table), so both sides are counted from one.
	_, _ = c.s.state.BlockingQuery(ctx, serversIndex+1, func(snap *state.Snapshot) (uint64, error) {
		return snap.TableIndex(state.TableServers) + 1, nil
	})
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}
