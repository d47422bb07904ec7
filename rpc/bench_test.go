package rpc_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// BenchmarkRegister measures Node.Register of new nodes through gRPC and
// raft (bbolt fsync included) on one server, with 1, 16 and 64 callers each
// on its own connection, as agents would be. It reports calls per second and
// the median and 99th percentile latency of a call.
func BenchmarkRegister(b *testing.B) {
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			srv := testserver.Start(b)
			clients := make([]droverv1.NodeServiceClient, callers)
			for i := range clients {
				clients[i] = droverv1.NewNodeServiceClient(testserver.Dial(b, srv.RPCAddr()))
			}
			reqs := make([]*droverv1.RegisterNodeRequest, b.N)
			for i := range reqs {
				reqs[i] = &droverv1.RegisterNodeRequest{Node: mock.Node()}
			}
			b.ResetTimer()
			latencies, elapsed := runCallers(b, callers, func(caller, i int) error {
				_, err := clients[caller].Register(context.Background(), reqs[i])
				return err
			})
			b.StopTimer()
			reportLatencies(b, latencies, elapsed)
		})
	}
}

// BenchmarkGRPCFloor measures bare gRPC round trips (grpc.health.v1
// Check: no raft, no state) with 64 callers each on its own connection, as
// BenchmarkRegister makes them. It is the ceiling any RPC of this server can
// reach on the machine, with client and server sharing its cores.
func BenchmarkGRPCFloor(b *testing.B) {
	const callers = 64
	srv := testserver.Start(b)
	clients := make([]healthpb.HealthClient, callers)
	for i := range clients {
		clients[i] = healthpb.NewHealthClient(testserver.Dial(b, srv.RPCAddr()))
	}
	b.ResetTimer()
	latencies, elapsed := runCallers(b, callers, func(caller, _ int) error {
		_, err := clients[caller].Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err
	})
	b.StopTimer()
	reportLatencies(b, latencies, elapsed)
}

// runCallers makes b.N calls from callers goroutines, each taking the next
// call number until all are made, and returns each call's latency and the
// wall time of the whole run.
func runCallers(b *testing.B, callers int, call func(caller, i int) error) ([]time.Duration, time.Duration) {
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				began := time.Now()
				if err := call(c, i); err != nil {
					b.Error(err)
					return
				}
				latencies[i] = time.Since(began)
			}
		})
	}
	wg.Wait()
	return latencies, time.Since(start)
}

// BenchmarkGetAllocsWakeup measures one long-poll wake-up: the time from a
// plan changing the allocation of a node whose agent is blocked in GetAllocs
// (here, an in-place update of its one allocation) until the agent holds
// the response.
func BenchmarkGetAllocsWakeup(b *testing.B) {
	srv := testserver.Start(b)
	e := &env{srv: srv}
	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	n := mock.Node()
	if _, err := nodes.Register(context.Background(), &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
		b.Fatal(err)
	}
	j := mock.Job(1)
	if _, err := droverv1.NewJobServiceClient(srv.Conn).Register(context.Background(), &droverv1.RegisterJobRequest{Job: j}); err != nil {
		b.Fatal(err)
	}
	job := srv.State().Snapshot().JobByID(j.GetId())
	alloc := mock.Alloc(n, job, 0)
	index := uint64(1)
	latencies := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		done := make(chan uint64, 1)
		go func() {
			resp, err := nodes.GetAllocs(context.Background(), &droverv1.GetAllocsRequest{
				NodeId: n.GetId(), SecretId: n.GetSecretId(), MinIndex: index, MaxWait: durationpb.New(time.Minute)})
			if err != nil {
				b.Error(err)
			}
			done <- resp.GetIndex()
		}()
		waitBlocked(b, e, 1)
		update := alloc.CloneVT()
		update.DesiredDescription = fmt.Sprintf("update %d", i)
		entry := &droverv1.PlanResultEntry{Allocations: []*droverv1.Allocation{update}}
		if _, _, err := srv.Apply(context.Background(), droverv1.MessageTypePlanResult, entry); err != nil {
			b.Fatal(err)
		}
		applied := time.Now()
		index = <-done
		latencies = append(latencies, time.Since(applied))
	}
	reportLatencies(b, latencies, 0)
}

// BenchmarkGetAllocsAnswer measures one GetAllocs answered at once (no
// wait) for a node running one allocation of each of its jobs, 20 as in
// c1m or 200 as in the full C1M, by what the agent names: nothing; the job
// versions it holds; those and the allocations it holds; or the
// state_index of the answer it holds (nothing changed since, in each).
// Client and server share the process, so the agent's encoding and
// decoding are in the figures.
//
//	go test -run '^$' -bench GetAllocsAnswer -count 5 ./rpc/
func BenchmarkGetAllocsAnswer(b *testing.B) {
	// No workers: they would place the jobs registered below on the node
	// while the answers are measured.
	srv := testserver.Start(b, func(c *server.Config) { c.Scheduler.NumWorkers = 0 })
	for _, jobs := range []int{20, 200} {
		b.Run(fmt.Sprintf("allocs=%d", jobs), func(b *testing.B) { benchmarkGetAllocsAnswer(b, srv, jobs) })
	}
}

func benchmarkGetAllocsAnswer(b *testing.B, srv *testserver.Server, jobs int) {
	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	n := mock.Node()
	if _, err := nodes.Register(context.Background(), &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
		b.Fatal(err)
	}
	entry := &droverv1.PlanResultEntry{}
	for i := range jobs {
		j := mock.Job(1)
		if _, err := droverv1.NewJobServiceClient(srv.Conn).Register(context.Background(), &droverv1.RegisterJobRequest{Job: j}); err != nil {
			b.Fatal(err)
		}
		entry.Allocations = append(entry.Allocations, mock.Alloc(n, srv.State().Snapshot().JobByID(j.GetId()), i))
	}
	if _, _, err := srv.Apply(context.Background(), droverv1.MessageTypePlanResult, entry); err != nil {
		b.Fatal(err)
	}
	ask := func(req *droverv1.GetAllocsRequest) *droverv1.GetAllocsResponse {
		req.NodeId, req.SecretId = n.GetId(), n.GetSecretId()
		resp, err := nodes.GetAllocs(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	first := ask(&droverv1.GetAllocsRequest{})
	var allJobs []*droverv1.KnownJobVersion
	for _, j := range first.GetJobs() {
		allJobs = append(allJobs, &droverv1.KnownJobVersion{JobId: j.GetId(), Version: j.GetVersion(), JobModifyIndex: j.GetJobModifyIndex()})
	}
	var allAllocs []*droverv1.KnownAlloc
	for _, a := range first.GetAllocs() {
		allAllocs = append(allAllocs, &droverv1.KnownAlloc{AllocId: a.GetId(), ModifyIndex: a.GetModifyIndex()})
	}
	slices.SortFunc(allAllocs, func(a, b *droverv1.KnownAlloc) int { return strings.Compare(a.GetAllocId(), b.GetAllocId()) })
	for _, bc := range []struct {
		name                 string
		req                  *droverv1.GetAllocsRequest
		wantAllocs, wantJobs int
	}{
		{"known=none", &droverv1.GetAllocsRequest{}, jobs, jobs},
		{"known=jobs", &droverv1.GetAllocsRequest{KnownJobs: allJobs}, jobs, 0},
		{"known=jobs,allocs", &droverv1.GetAllocsRequest{KnownJobs: allJobs, KnownAllocs: allAllocs}, 0, 0},
		{"known=index", &droverv1.GetAllocsRequest{KnownIndex: first.GetStateIndex(), KnownCount: uint32(jobs)}, 0, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp := ask(bc.req)
				named := len(resp.GetAllocs()) + len(resp.GetUnchangedAllocIds())
				if len(resp.GetAllocs()) != bc.wantAllocs || len(resp.GetJobs()) != bc.wantJobs || (named != jobs && !resp.GetSinceKnownIndex()) {
					b.Fatalf("%d allocations, %d unchanged and %d jobs, want %d, %d and %d",
						len(resp.GetAllocs()), len(resp.GetUnchangedAllocIds()), len(resp.GetJobs()), bc.wantAllocs, jobs-bc.wantAllocs, bc.wantJobs)
				}
			}
		})
	}
}

// reportLatencies adds p50/p99 and, given the elapsed wall time, calls per
// second to the benchmark's output.
func reportLatencies(b *testing.B, latencies []time.Duration, elapsed time.Duration) {
	if len(latencies) == 0 {
		return
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	pct := func(p float64) time.Duration { return sorted[int(float64(len(sorted)-1)*p)] }
	b.ReportMetric(float64(pct(0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(pct(0.99).Microseconds()), "p99-µs")
	if elapsed > 0 {
		b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "calls/s")
	}
}
