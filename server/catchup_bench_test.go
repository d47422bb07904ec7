package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// BenchmarkWipedServerCatchUp100k measures how long a follower whose data
// dir was wiped takes to catch up with a 3-server cluster holding 100,000
// allocations on 1,000 nodes. Snapshots are frequent and few logs are kept,
// so the follower catches up by installing a snapshot. One op is one wipe
// and catch-up.
//
//	go test -run '^$' -bench WipedServerCatchUp100k -benchtime 1x -count 5 ./server/
func BenchmarkWipedServerCatchUp100k(b *testing.B) {
	servers := testserver.StartCluster(b, 3, func(c *server.Config) {
		c.SnapshotThreshold = 64
		c.SnapshotInterval = 200 * time.Millisecond
		c.TrailingLogs = 64
	})
	leader := waitLeader(b, servers)
	jobID := seedAllocations(b, leader, 1000, 100_000)
	for _, s := range servers {
		waitForSnapshot(b, s.Config.DataDir)
	}
	follower := followers(servers, leader)[0]
	b.ResetTimer()
	for range b.N {
		target := leader.State().LatestIndex()
		start := time.Now()
		follower = follower.Wipe(b)
		deadline := start.Add(2 * time.Minute)
		for follower.State().LatestIndex() < target {
			if time.Now().After(deadline) {
				b.Fatalf("wiped follower at index %d after 2m, leader at %d", follower.State().LatestIndex(), target)
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/catchup")
	}
	b.StopTimer()
	if got, _ := follower.State().Snapshot().AllocsByJob(jobID); len(got) != 100_000 {
		b.Fatalf("caught-up follower holds %d allocations, want 100000", len(got))
	}
}

// seedAllocations registers nodes and one job, then writes allocs
// allocations spread over the nodes in plan results of 1,000.
func seedAllocations(b *testing.B, leader *testserver.Server, nodes, allocs int) (jobID string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	ns := make([]*droverv1.Node, nodes)
	entry := &droverv1.NodeRegisterEntry{RegisteredAt: time.Now().UnixNano()}
	for i := range ns {
		ns[i] = mock.Node()
		entry.Nodes = append(entry.Nodes, ns[i])
	}
	if _, _, err := leader.Apply(ctx, droverv1.MessageTypeNodeRegister, entry); err != nil {
		b.Fatal(err)
	}
	job := mock.Job(int32(allocs))
	if _, err := droverv1.NewJobServiceClient(leader.Conn).Register(ctx, &droverv1.RegisterJobRequest{Job: job}); err != nil {
		b.Fatal(err)
	}
	job = leader.State().Snapshot().JobByID(job.GetId())
	for start := 0; start < allocs; start += 1000 {
		plan := &droverv1.PlanResultEntry{AppliedAt: time.Now().UnixNano()}
		for i := start; i < min(start+1000, allocs); i++ {
			plan.Allocations = append(plan.Allocations, mock.Alloc(ns[i%nodes], job, i))
		}
		if _, _, err := leader.Apply(ctx, droverv1.MessageTypePlanResult, plan); err != nil {
			b.Fatal(err)
		}
	}
	return job.GetId()
}
