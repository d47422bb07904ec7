package test_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// BenchmarkClusterWrites measures Node.Register on a 3-server cluster of
// real processes: writes per second, and per-call p50 and p99 latency. The
// writers call the leader, or a follower that forwards to it. b.N is the
// total number of writes.
//
//	go test -run '^$' -bench ClusterWrites -benchtime 20000x -count 5 ./test/
func BenchmarkClusterWrites(b *testing.B) {
	c := cluster.New(b, droverBin, 3)
	ctx := b.Context()
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	for _, bc := range []struct {
		via     string
		target  *cluster.Server
		writers int
	}{
		{"leader", leader, 1},
		{"leader", leader, 64},
		{"follower", follower, 64},
	} {
		b.Run(fmt.Sprintf("via=%s/writers=%d", bc.via, bc.writers), func(b *testing.B) {
			nodes := make([]*droverv1.Node, b.N)
			for i := range nodes {
				nodes[i] = mock.Node()
			}
			cpu0 := clusterCPU(b, c)
			latencies := runWriters(b, bc.target.Conn(), nodes, bc.writers)
			b.ReportMetric(float64((clusterCPU(b, c)-cpu0).Microseconds())/float64(b.N), "server-cpu-us/write")
			reportLatencies(b, latencies)
		})
	}
}

// clusterCPU sums the CPU time the cluster's server processes have used.
func clusterCPU(b *testing.B, c *cluster.Cluster) time.Duration {
	var sum time.Duration
	for _, s := range c.Servers() {
		sum += procCPU(b, s.Pid())
	}
	return sum
}

// runWriters registers nodes from writers goroutines and returns every
// call's latency; any failed write fails the benchmark.
func runWriters(b *testing.B, conn grpc.ClientConnInterface, nodes []*droverv1.Node, writers int) []time.Duration {
	client := droverv1.NewNodeServiceClient(conn)
	return runCalls(b, len(nodes), writers, "writes/s", func(i int) error {
		_, err := client.Register(b.Context(), &droverv1.RegisterNodeRequest{Node: nodes[i]})
		return err
	})
}

// runCalls makes n calls (call(0) to call(n-1)) from callers goroutines,
// reports the rate as unit, and returns every call's latency; any failed
// call fails the benchmark.
func runCalls(b *testing.B, n, callers int, unit string, call func(i int) error) []time.Duration {
	latencies := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	b.ResetTimer()
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := call(i); err != nil {
					errs <- err
					return
				}
				latencies[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatalf("call failed: %v", err)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), unit)
	return latencies
}

// reportLatencies reports the median and 99th percentile.
func reportLatencies(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkFailover measures, on a 3-server cluster, the time from kill -9
// of the leader to the first write acknowledged by the new leader. A writer
// retries through a surviving follower every 10ms, so the figure is within
// 10ms of the true one. Each op is one failover; the killed server is
// restarted and caught up between ops, outside the timer. The reported
// figure is the median of the ops.
//
//	go test -run '^$' -bench Failover -benchtime 10x -count 1 ./test/
func BenchmarkFailover(b *testing.B) {
	c := cluster.New(b, droverBin, 3)
	ctx := b.Context()
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		leader := c.WaitLeader(ctx)
		c.WaitConverged(ctx)
		via := c.Others(leader)[0].Conn()
		b.StartTimer()
		start := time.Now()
		leader.Kill()
		for {
			callCtx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := droverv1.NewNodeServiceClient(via).Register(callCtx, &droverv1.RegisterNodeRequest{Node: mock.Node()})
			cancel()
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		leader.Restart()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}
