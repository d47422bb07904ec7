package simagent_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// TestFleetFailsTheAllocationsItsRateNames runs a service job with a
// failure rate of one half: every allocation the servers hold must end as
// Fails predicts, failed or running.
func TestFleetFailsTheAllocationsItsRateNames(t *testing.T) {
	const rate = 0.5
	srv := testserver.Start(t)
	f := startFleet(t, []string{srv.RPCAddr()}, 10, func(c *simagent.Config) {
		c.StartDelay = 20 * time.Millisecond
		c.FailureRate = rate
	})
	waitReady(t, srv, f)
	job := mock.Job(10)
	registerJob(t, srv, job)
	failed := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
	running := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	waitFor(t, "the first 10 allocations running or failed as predicted", func() (bool, string) {
		allocs, _ := srv.State().Snapshot().AllocsByJob(job.GetId())
		settled := 0
		for _, a := range allocs {
			want := running
			if simagent.Fails(a.GetId(), rate) {
				want = failed
			}
			switch a.GetClientStatus() {
			case want:
				settled++
			case failed, running:
				return false, fmt.Sprintf("allocation %s is %s, want %s", a.GetId(), a.GetClientStatus(), want)
			}
		}
		return settled >= 10, fmt.Sprintf("%d of %d allocations settled", settled, len(allocs))
	})
	// The servers apply a report before its call returns to the agent, so
	// the fleet may record the call's latency a moment after the state
	// shows it.
	waitFor(t, "the fleet's latencies observed", func() (bool, string) {
		st := f.Stats()
		return st.UpdateAllocLatency.Count() > 0 && st.GetAllocsLatency.Count() >= 10,
			fmt.Sprintf("%d UpdateAlloc calls, %d allocation changes received", st.UpdateAllocLatency.Count(), st.GetAllocsLatency.Count())
	})
	st := f.Stats()
	t.Logf("p99 UpdateAlloc %s, GetAllocs %s", st.UpdateAllocLatency.Quantile(0.99), st.GetAllocsLatency.Quantile(0.99))
}

// TestFleetFlakyNodesComeBack makes half the nodes go silent for longer
// than the servers wait for a heartbeat: the servers must see them leave,
// and every node must be ready again with the job's allocations running,
// whether the agents return in order or with their calls shuffled.
func TestFleetFlakyNodesComeBack(t *testing.T) {
	for _, reorder := range []bool{false, true} {
		t.Run(fmt.Sprintf("reorder=%v", reorder), func(t *testing.T) {
			srv := testserver.Start(t, func(c *server.Config) {
				c.Heartbeat.MinTTL = 200 * time.Millisecond
				c.Heartbeat.Grace = 100 * time.Millisecond
			})
			f := startFleet(t, []string{srv.RPCAddr()}, 4, func(c *simagent.Config) {
				c.RetryMin, c.RetryMax = 10*time.Millisecond, 200*time.Millisecond
				c.Faults = simagent.Faults{Fraction: 0.5, Every: 3 * time.Second, Offline: 1500 * time.Millisecond, ReorderOnReturn: reorder}
			})
			waitReady(t, srv, f)
			job := mock.Job(4)
			job.TaskGroups[0].MaxClientDisconnect = durationpb.New(time.Hour)
			registerJob(t, srv, job)

			flaky := map[string]bool{}
			for i, a := range f.Agents() {
				if _, ok := (simagent.Faults{Fraction: 0.5}).Flaky(i); ok {
					flaky[a.Node().ID] = true
				}
			}
			seenAway := map[string]bool{}
			running := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
			waitFor(t, "the flaky nodes gone and back, with the job running", func() (bool, string) {
				snap := srv.State().Snapshot()
				ready := 0
				for _, a := range f.Agents() {
					switch snap.NodeByID(a.Node().ID).GetStatus() {
					case droverv1.NodeStatus_NODE_STATUS_READY:
						ready++
					case droverv1.NodeStatus_NODE_STATUS_DOWN, droverv1.NodeStatus_NODE_STATUS_DISCONNECTED:
						seenAway[a.Node().ID] = true
					}
				}
				st := f.Stats()
				got := jobAllocs(srv, job.GetId())
				return len(seenAway) == 2 && st.Returns >= 2 && ready == 4 && got[running] == 4,
					fmt.Sprintf("seen away %d, stats %d disconnects %d returns, %d ready, allocations %v",
						len(seenAway), st.Disconnects, st.Returns, ready, got)
			})
			for id := range seenAway {
				if !flaky[id] {
					t.Errorf("node %s went away but is not flaky", id)
				}
			}
		})
	}
}
