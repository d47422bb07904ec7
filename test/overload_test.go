package test_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/droverhq/drover/test/cluster"
	"github.com/droverhq/drover/test/flood"
)

// TestOperatorFloodKeepsCluster floods a follower, then the leader, of a
// 3-server cluster for 15s with whole-fleet Node.List calls from 400
// connections while 2,000 simulated nodes heartbeat with 2-4s TTLs. The
// servers' limits must refuse what they cannot take at once,
// RESOURCE_EXHAUSTED with a retry hint: no call may end in DeadlineExceeded
// (5s, where an admitted call takes milliseconds) or fail otherwise, no node
// may be marked down or disconnected, and the leader and its term must stay
// the same. So that the test cannot pass vacuously, the flood must have been
// refused at least once and answered at least once. Without the operator
// bound (-rpc-max-list-calls 100000) the same flood ends hundreds of
// calls in DeadlineExceeded and costs several elections on a 2-core machine.
func TestOperatorFloodKeepsCluster(t *testing.T) {
	const nodes = 2000
	c := cluster.New(t, droverBin, 3, cluster.Args("-heartbeat-min-ttl", "2s", "-heartbeat-grace", "2s",
		"-heartbeat-max-per-second", "5000", "-failover-heartbeat-ttl", "15s"))
	ctx := within(t, testContext(t), 3*time.Minute)
	leader := c.WaitLeader(ctx)
	fleet := startSimFleet(ctx, t, c, nodes)
	waitFleetReady(ctx, t, fleet)
	ids := fleetIDs(fleet)
	f := flood.Config{Conns: 400, Window: 15 * time.Second, CallTimeout: 5 * time.Second, PageSize: nodes}

	for _, target := range []*cluster.Server{c.Others(leader)[0], leader} {
		t.Run(fmt.Sprintf("target=%s", target), func(t *testing.T) {
			observer := c.Others(leader, target)[0]
			marks := watchMarks(ctx, t, observer, lastIndex(ctx, t, leader)+1)
			watch := watchCluster(ctx, c, observer, 250*time.Millisecond)
			t.Cleanup(watch.stop)
			term0 := lastTerm(ctx, t, leader)

			res := runFlood(ctx, t, target, f)
			end := time.Now()
			t.Logf("flood: %s", res)
			// A node the flood kept from heartbeating is marked before
			// its first heartbeat after the flood.
			waitHeartbeatedSince(ctx, t, end, fleet)
			watch.stop()
			marks.close()
			t.Logf("cluster: %s", watch)

			if res.TimedOut > 0 {
				t.Errorf("%d calls ended in DeadlineExceeded", res.TimedOut)
			}
			for code, n := range res.Refused {
				if code != codes.ResourceExhausted {
					t.Errorf("%d calls failed %s", n, code)
				}
			}
			if exhausted := res.Refused[codes.ResourceExhausted]; exhausted == 0 || res.WithRetryInfo != exhausted || res.Answered == 0 {
				t.Errorf("%d calls answered, %d refused RESOURCE_EXHAUSTED (%d with RetryInfo); want both, every refusal with a hint",
					res.Answered, exhausted, res.WithRetryInfo)
			}
			if err := marks.failure(); err != nil {
				t.Fatalf("following node events on %s: %v", observer, err)
			}
			if bad := marks.of(ids); len(bad) > 0 {
				t.Errorf("%d nodes marked during the flood, e.g. %s", len(bad), bad[0])
			}
			if now := c.WaitLeader(ctx); now != leader || watch.term() != term0 || len(watch.leaders) != 1 {
				t.Errorf("leader %s at term %d before the flood; %s at term %d after, leaders seen %v",
					leader, term0, now, watch.term(), watch.leaders)
			}
		})
	}
}
