package test_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// BenchmarkRollingUpdate rolls new versions of a 1,000-allocation job out
// on a 3-server cluster of real processes and 2,000 simulated nodes, with
// max_parallel 50 and min_healthy_time 0 (an allocation is healthy as soon
// as its agent runs it). Each iteration registers a version that replaces
// every allocation and waits until its deployment is successful: the time
// that takes, and the raft entries written meanwhile, per rollout.
//
//	go test -run '^$' -bench RollingUpdate -benchtime 3x -count 3 -timeout 30m ./test/
func BenchmarkRollingUpdate(b *testing.B) {
	c := cluster.New(b, droverBin, 3)
	ctx := b.Context()
	leader := c.WaitLeader(ctx)
	waitRecorded(ctx, b, c)
	fleet := startSimFleet(ctx, b, c, 2000, func(cfg *simagent.Config) {
		cfg.HeartbeatOnly = false
		cfg.StartDelay = 100 * time.Millisecond
	})
	waitFleetReady(ctx, b, fleet)
	dc := newDeployClients(c.Others(leader)[0].Conn())

	job := mock.Job(1000)
	job.Id = "rollout-bench"
	tg := job.TaskGroups[0]
	tg.Resources.CpuMhz, tg.Resources.MemoryMb, tg.Resources.Ports = 10, 10, nil
	tg.Update = &droverv1.UpdateStrategy{MaxParallel: proto.Int32(50), MinHealthyTime: durationpb.New(0)}
	dc.register(ctx, b, job)
	dc.waitStatus(ctx, b, job.GetId(), 0, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)

	var entries uint64
	b.ResetTimer()
	for i := range b.N {
		before := lastIndex(ctx, b, leader)
		tg.Resources.MemoryMb++
		dc.register(ctx, b, job)
		dc.waitStatus(ctx, b, job.GetId(), uint64(i+1), droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)
		entries += lastIndex(ctx, b, leader) - before
	}
	b.StopTimer()
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/rollout")
	b.ReportMetric(float64(entries)/float64(b.N), "raft-entries/rollout")
	b.ReportMetric(0, "ns/op")
}
