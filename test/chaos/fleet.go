package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// The fleet: simulated agents running allocations, and two jobs a scaler
// resizes while the faults happen, so that the servers place, stop and
// replace work throughout and the placement invariants have something to
// check. One job asks for a static port (at most one allocation per node),
// the other for a large share of a node's CPU.
const (
	fleetNodes  = 6
	scaleEvery  = 400 * time.Millisecond
	staticJobID = "fleet-static"
	cpuJobID    = "fleet-cpu"
)

// Fleet is the simulated agents and the scaler.
type Fleet struct {
	agents *simagent.Fleet
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// StartFleet starts the agents against every server of c, and the scaler.
func StartFleet(ctx context.Context, c *cluster.Cluster, seed uint64) (*Fleet, error) {
	cfg := simagent.Config{Nodes: simagent.DefaultTemplate().Nodes(fleetNodes), StartDelay: 100 * time.Millisecond}
	for _, s := range c.Servers() {
		cfg.Servers = append(cfg.Servers, s.RPCAddr())
	}
	agents, err := simagent.NewFleet(cfg)
	if err != nil {
		return nil, err
	}
	if err := agents.Start(ctx); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	f := &Fleet{agents: agents, stop: stop}
	rng := rand.New(rand.NewPCG(seed, 0xf1ee7))
	f.wg.Go(func() { scale(ctx, c, rng) })
	return f, nil
}

// Stop stops the scaler and the agents.
func (f *Fleet) Stop() {
	f.stop()
	f.wg.Wait()
	f.agents.Stop()
}

// scale registers the fleet's jobs with a new random count now and then,
// through random servers, until ctx ends. Failures are ignored: the next
// round writes again.
func scale(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) {
	tick := time.NewTicker(scaleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		all := c.Servers()
		srv := all[rng.IntN(len(all))]
		job := fleetJob(staticJobID, int32(rng.IntN(fleetNodes+3)), 8080, 500)
		if rng.IntN(2) == 0 {
			job = fleetJob(cpuJobID, int32(rng.IntN(3*fleetNodes)), 0, 1500)
		}
		cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		_, _ = droverv1.NewJobServiceClient(srv.Conn()).Register(cctx, &droverv1.RegisterJobRequest{Job: job, RequestId: uuid.NewString()})
		cancel()
	}
}

// fleetJob is a service job of count allocations, each asking for cpu and
// a port (static when port is not zero).
func fleetJob(id string, count, port int32, cpu int64) *droverv1.Job {
	j := &droverv1.Job{
		Id:          id,
		Type:        droverv1.JobType_JOB_TYPE_SERVICE,
		Datacenters: []string{"dc1"},
		TaskGroups: []*droverv1.TaskGroup{{
			Name:      "web",
			Count:     count,
			Resources: &droverv1.Resources{CpuMhz: cpu, MemoryMb: 256, Ports: []*droverv1.Port{{Label: "http", Value: port}}},
			Tasks:     []*droverv1.Task{{Name: "server", Driver: "exec", Config: map[string]string{"command": fmt.Sprintf("/bin/%s", id)}}},
		}},
	}
	j.Canonicalize()
	return j
}
