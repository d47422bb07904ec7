package test_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// reuseNetwork is the allocation network of TestAddressReuseOrder: 6 usable
// addresses.
const reuseNetwork = "10.77.0.8/29"

// TestAddressReuseOrder scales a job down and up on a 3-server cluster of
// real processes whose allocation network has 6 addresses, with simulated
// agents running the work and reporting stopped allocations complete.
// Some scale-ups wait until the stopped allocations have ended, others
// come at once, while they may still run. Half way a follower is wiped and
// catches up by snapshot, and must then agree with the others on the
// release history. From the allocations' own indexes the test replays
// history: every plan must have handed out never-used addresses first,
// then the longest released, and never an address held by an allocation
// that was not client-terminal.
func TestAddressReuseOrder(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.Args("-alloc-cidr", reuseNetwork), cluster.Snapshots(64, time.Second, 32))
	ctx := within(t, testContext(t), 2*time.Minute)
	leader := c.WaitLeader(ctx)
	conn := leader.Conn()
	fleet := startSimFleet(ctx, t, c, 2, func(cfg *simagent.Config) {
		cfg.HeartbeatOnly = false
		cfg.StartDelay = 50 * time.Millisecond
	})
	waitFleetReady(ctx, t, fleet)

	job := mock.Job(3)
	job.TaskGroups[0].Resources = &droverv1.Resources{CpuMhz: 10, MemoryMb: 10}
	job.Canonicalize()
	scale := func(count int32, wait bool) {
		t.Helper()
		job.TaskGroups[0].Count = count
		if _, err := registerJob(ctx, conn, job, ""); err != nil {
			t.Fatal(err)
		}
		if wait {
			waitEnded(ctx, t, conn, job.GetId(), int(count))
		}
	}
	cycles := []struct {
		down, up int32
		// wait lets the stopped allocations end before scaling up.
		wait bool
	}{
		{1, 4, true}, {2, 5, true}, {0, 3, false}, {1, 6, true}, {2, 4, false}, {1, 3, true},
	}
	scale(3, true)
	for i, cy := range cycles {
		if i == len(cycles)/2 {
			rejoinBySnapshot(ctx, t, c)
			conn = c.WaitLeader(ctx).Conn()
		}
		scale(cy.down, cy.wait)
		scale(cy.up, true)
	}

	allocs, err := jobAllocs(ctx, conn, job.GetId())
	if err != nil {
		t.Fatal(err)
	}
	checkAddressHistory(t, netip.MustParsePrefix(reuseNetwork), allocs)
	c.WaitConverged(ctx)
}

// waitEnded waits until count allocations of the job run and every other
// one has ended on its node.
func waitEnded(ctx context.Context, t *testing.T, conn grpc.ClientConnInterface, jobID string, count int) {
	t.Helper()
	poll(ctx, t, fmt.Sprintf("job %s at %d with the rest ended", jobID, count), func() (bool, string) {
		allocs, err := jobAllocs(ctx, conn, jobID)
		if err != nil {
			return false, err.Error()
		}
		running := len(filterAllocs(allocs, isRunningWanted))
		ending := len(filterAllocs(allocs, func(a *droverv1.Allocation) bool { return a.ServerTerminal() && !a.ClientTerminal() }))
		return running == count && wantedRunning(allocs) == count && ending == 0,
			fmt.Sprintf("%d running, %d stopped but not ended", running, ending)
	})
}

// rejoinBySnapshot stops a follower, wipes it, makes the leader compact its
// log and restarts the follower, which must catch up through a snapshot.
func rejoinBySnapshot(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	follower.Stop()
	follower.Wipe()
	registerNodes(ctx, t, leader.Conn(), 100, 4)
	poll(ctx, t, "leader compacted its log", func() (bool, string) {
		_, ok := leader.Logged("compacting logs")
		return ok, fmt.Sprintf("raft's %q not in %s's log", "compacting logs", leader)
	})
	follower.Restart()
	c.WaitConverged(ctx)
	if _, ok := follower.Logged(installedSnapshot); !ok {
		t.Fatalf("%s caught up without a snapshot", follower)
	}
}

// checkAddressHistory replays the allocations' lives from their indexes (an
// allocation holds its address from its create index until the index at
// which it became client-terminal, its modify index then) and checks each
// plan's placements: never an address held at the time, the never-used
// ones first, then the longest released (ties in address order).
func checkAddressHistory(t *testing.T, network netip.Prefix, allocs []*droverv1.Allocation) {
	t.Helper()
	released := func(a *droverv1.Allocation) uint64 {
		if a.ClientTerminal() {
			return a.GetModifyIndex()
		}
		return ^uint64(0)
	}
	byPlan := map[uint64][]*droverv1.Allocation{}
	for _, a := range allocs {
		byPlan[a.GetCreateIndex()] = append(byPlan[a.GetCreateIndex()], a)
	}
	for _, at := range slices.Sorted(maps.Keys(byPlan)) {
		placed := byPlan[at]
		// The network as it was when the plan was applied.
		used := map[string]bool{}
		lastRelease := map[string]uint64{}
		held := map[string]bool{}
		for _, a := range allocs {
			if a.GetCreateIndex() >= at {
				continue
			}
			ip := a.GetResources().GetIp()
			used[ip] = true
			if r := released(a); r < at {
				lastRelease[ip] = max(lastRelease[ip], r)
			} else {
				held[ip] = true
			}
		}
		var neverUsed, free []string
		for a := network.Addr().Next(); network.Contains(a.Next()); a = a.Next() {
			switch ip := a.String(); {
			case !used[ip]:
				neverUsed = append(neverUsed, ip)
			case !held[ip]:
				free = append(free, ip)
			}
		}
		slices.SortStableFunc(free, func(x, y string) int { return cmp.Compare(lastRelease[x], lastRelease[y]) })
		var fresh, reused []string
		for _, a := range placed {
			ip := a.GetResources().GetIp()
			switch {
			case held[ip]:
				t.Errorf("index %d: %s placed at %s, held by an allocation not client-terminal", at, a.GetId(), ip)
			case slices.Contains(neverUsed, ip):
				fresh = append(fresh, ip)
			default:
				reused = append(reused, ip)
			}
		}
		slices.SortFunc(reused, func(x, y string) int { return slices.Index(free, x) - slices.Index(free, y) })
		if want := min(len(placed), len(neverUsed)); len(fresh) != want {
			t.Errorf("index %d: %d of %d placements got never-used addresses, want %d (never used then: %v)", at, len(fresh), len(placed), want, neverUsed)
		} else if want := free[:len(reused)]; !slices.Equal(reused, want) {
			t.Errorf("index %d: reused %v, want the longest released %v (free then, oldest first: %v)", at, reused, want, free)
		}
		t.Logf("index %d: placed %v new, %v reused", at, fresh, reused)
	}
}
