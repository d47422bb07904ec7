package jobplan_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
	"github.com/droverhq/drover/server/jobplan"
)

// BenchmarkPlan times JobService.Plan's work (jobplan.Plan: the scheduler
// over a snapshot, nothing written) for a job of 1,000 allocations on 5,000
// ready nodes of 4,000 MHz and 8,192 MB, each allocation asking 100 MHz and
// 128 MB: a new job (1,000 placements), the job running unchanged (1,000
// left alone), and a change of its resources (1,000 replaced).
//
//	go test -run '^$' -bench Plan -benchtime 20x -count 3 ./server/jobplan/
func BenchmarkPlan(b *testing.B) {
	const nodes, allocs = 5000, 1000
	st, index := readyNodes(b, nodes)
	job := mock.Job(allocs)
	job.TaskGroups[0].Resources.Ports = nil
	cfg := scheduler.Config{AllocCIDR: netip.MustParsePrefix("10.0.0.0/8")}

	b.Run("new job", func(b *testing.B) {
		benchPlan(b, st.Snapshot(), cfg, job, &droverv1.DesiredUpdates{Place: allocs})
	})

	register(b, st, index, job, nodes, allocs)
	b.Run("unchanged", func(b *testing.B) {
		benchPlan(b, st.Snapshot(), cfg, job, &droverv1.DesiredUpdates{Ignore: allocs})
	})
	changed := job.CloneVT()
	changed.TaskGroups[0].Resources.MemoryMb *= 2
	b.Run("destructive change", func(b *testing.B) {
		benchPlan(b, st.Snapshot(), cfg, changed, &droverv1.DesiredUpdates{DestructiveUpdate: allocs})
	})
}

func benchPlan(b *testing.B, snap *state.Snapshot, cfg scheduler.Config, job *droverv1.Job, want *droverv1.DesiredUpdates) {
	for b.Loop() {
		resp, err := jobplan.Plan(context.Background(), snap, cfg, job, 1)
		if err != nil {
			b.Fatal(err)
		}
		got := resp.GetDesiredUpdates()[job.GetTaskGroups()[0].GetName()]
		if got.GetPlace() != want.GetPlace() || got.GetIgnore() != want.GetIgnore() || got.GetDestructiveUpdate() != want.GetDestructiveUpdate() {
			b.Fatalf("plan %v, want %v", got, want)
		}
	}
}

// readyNodes is a state store holding n ready nodes, and its last index.
func readyNodes(b *testing.B, n int) (*state.StateStore, uint64) {
	st, err := state.NewStateStore()
	if err != nil {
		b.Fatal(err)
	}
	entry := &droverv1.NodeRegisterEntry{RegisteredAt: 1}
	for range n {
		node := mock.Node()
		node.Status = droverv1.NodeStatus_NODE_STATUS_READY
		entry.Nodes = append(entry.Nodes, node)
	}
	index := uint64(1)
	if _, _, err := st.UpsertNodes(index, entry); err != nil {
		b.Fatal(err)
	}
	for _, node := range entry.GetNodes() {
		index++
		if _, err := st.UpdateNodeStatus(index, &droverv1.NodeStatusEntry{NodeId: node.GetId(), Status: droverv1.NodeStatus_NODE_STATUS_READY, UpdatedAt: 2}); err != nil {
			b.Fatal(err)
		}
	}
	return st, index
}

// register stores the job with allocs running allocations spread over the
// nodes, after index.
func register(b *testing.B, st *state.StateStore, index uint64, job *droverv1.Job, nodes, allocs int) {
	index++
	ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	if _, _, err := st.UpsertJob(index, &droverv1.JobRegisterEntry{Job: job.CloneVT(), Eval: ev, SubmittedAt: 1}); err != nil {
		b.Fatal(err)
	}
	snap := st.Snapshot()
	stored := snap.JobByID(job.GetId())
	all := make([]*droverv1.Node, 0, nodes)
	for n := range snap.Nodes() {
		all = append(all, n)
	}
	entry := &droverv1.PlanResultEntry{EvalId: ev.GetId(), AppliedAt: 1}
	for i := range allocs {
		a := mock.Alloc(all[i%len(all)], stored, i)
		a.Resources.Ports = nil
		a.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
		entry.Allocations = append(entry.Allocations, a)
	}
	index++
	if _, err := st.UpsertPlanResults(index, entry); err != nil {
		b.Fatal(fmt.Errorf("place the job's allocations: %w", err))
	}
}
