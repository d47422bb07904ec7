package test_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// BenchmarkClusterReads measures NodeService.Get of one node on a 3-server
// cluster of real processes: reads per second and per-call p50 and p99, for
// stale reads (allow_stale, answered by the server called) and consistent
// reads (answered by the leader after it confirms its leadership with a
// quorum), with 1 and 64 concurrent callers, calling the leader or a
// follower. b.N is the total number of reads.
//
//	go test -run '^$' -bench ClusterReads -benchtime 20000x -count 5 ./test/
func BenchmarkClusterReads(b *testing.B) {
	c := cluster.New(b, droverBin, 3)
	ctx := b.Context()
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	node := readyNodes(ctx, b, leader.Conn(), 1)[0]
	c.WaitConverged(ctx)
	for _, bc := range []struct {
		via     string
		target  *cluster.Server
		stale   bool
		callers int
	}{
		{"leader", leader, true, 1},
		{"leader", leader, false, 1},
		{"leader", leader, true, 64},
		{"leader", leader, false, 64},
		{"follower", follower, true, 64},
		{"follower", follower, false, 64},
	} {
		read := "consistent"
		if bc.stale {
			read = "stale"
		}
		b.Run(fmt.Sprintf("read=%s/via=%s/callers=%d", read, bc.via, bc.callers), func(b *testing.B) {
			req := &droverv1.GetNodeRequest{NodeId: node.GetId(), Query: &droverv1.QueryOptions{AllowStale: bc.stale}}
			reportLatencies(b, runReaders(b, bc.target.Conn(), req, bc.callers))
		})
	}
}

// runReaders makes b.N reads from callers goroutines and returns every
// call's latency.
func runReaders(b *testing.B, conn grpc.ClientConnInterface, req *droverv1.GetNodeRequest, callers int) []time.Duration {
	client := droverv1.NewNodeServiceClient(conn)
	return runCalls(b, b.N, callers, "reads/s", func(int) error {
		_, err := client.Get(b.Context(), req)
		return err
	})
}
