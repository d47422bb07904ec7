package test_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestDrainMovesGroupsInTurns drains a node that holds every allocation of
// two service groups and a system job's, on a real 3-server cluster with
// simulated agents running the work. Followed entry by entry on the event
// stream, the drain must never leave a service group with fewer than
// count - max_parallel allocations running, must use that parallelism
// (the fewest running is exactly count - max_parallel), and must stop the
// system job's allocation only once the service work has left the node.
// At the end the drain is complete, the node ineligible, and every group
// runs in full elsewhere.
func TestDrainMovesGroupsInTurns(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 2*time.Minute)
	c.WaitLeader(ctx)
	conn := c.Server(1).Conn()
	runAllocs := func(cfg *simagent.Config) {
		cfg.HeartbeatOnly = false
		cfg.StartDelay = 300 * time.Millisecond // replacements take a while to run
	}

	// Everything lands on the first node, the only one at first.
	first := startSimFleet(ctx, t, c, 1, runAllocs)
	waitFleetReady(ctx, t, first)
	drained := first.Agents()[0].Node().ID
	web := mock.Job(4) // default migrate: one at a time
	api := mock.Job(3)
	api.GetTaskGroups()[0].Migrate = &droverv1.MigrateStrategy{MaxParallel: 2}
	sys := mock.Job(1)
	sys.Type = droverv1.JobType_JOB_TYPE_SYSTEM
	for _, j := range []*droverv1.Job{web, api, sys} {
		if _, err := registerJob(ctx, conn, j, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(ctx, t, conn, web.GetId(), 4)
	waitRunning(ctx, t, conn, api.GetId(), 3)
	waitRunning(ctx, t, conn, sys.GetId(), 1)

	rest := startSimFleet(ctx, t, c, 3, runAllocs)
	waitFleetReady(ctx, t, rest)
	waitRunning(ctx, t, conn, sys.GetId(), 4)

	w := watchDrain(ctx, conn, drained, sys.GetId(), map[string]int32{web.GetId(): 4, api.GetId(): 3}, map[string]int32{web.GetId(): 1, api.GetId(): 2})
	defer w.entries.stop()
	resp, err := droverv1.NewNodeServiceClient(conn).UpdateDrain(ctx, &droverv1.UpdateNodeDrainRequest{NodeId: drained, Enable: true})
	if err != nil {
		t.Fatal(err)
	}
	var node *droverv1.Node
	poll(ctx, t, "the drain complete", func() (bool, string) {
		got, err := droverv1.NewNodeServiceClient(conn).Get(ctx, &droverv1.GetNodeRequest{NodeId: drained})
		if err != nil {
			return false, err.Error()
		}
		node = got.GetNode()
		return node.GetDrainStrategy() == nil, fmt.Sprintf("%d allocations still on the node", stillOn(got.GetAllocs()))
	})
	completed := false
	for _, ev := range node.GetEvents() {
		completed = completed || (ev.GetMessage() == "Node drain complete" && ev.GetCreateIndex() > resp.GetIndex())
	}
	if !completed || node.GetSchedulingEligibility() != droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE {
		t.Errorf("after the drain: eligibility %s, events %v; want ineligible with a drain-complete event", node.GetSchedulingEligibility(), node.GetEvents())
	}
	// The watch must have followed every write read here: the stream skips
	// entries without a node or allocation event, so the last raft index
	// may never come.
	newest := node.GetModifyIndex()
	for id, want := range map[string]int{web.GetId(): 4, api.GetId(): 3, sys.GetId(): 3} {
		allocs := waitRunning(ctx, t, conn, id, want)
		for _, a := range allocs {
			newest = max(newest, a.GetModifyIndex())
			if a.GetNodeId() == drained && !a.ClientTerminal() {
				t.Errorf("job %s: allocation %s still on the drained node", id, a.GetId())
			}
		}
	}

	if err := w.entries.waitFor(ctx, newest); err != nil {
		t.Fatal(err)
	}
	w.entries.stop() // the watch's results are final
	for _, v := range w.violations {
		t.Error(v)
	}
	for job, count := range w.counts {
		if floor := count - w.maxParallel[job]; w.fewest[job] != floor {
			t.Errorf("job %s: at fewest %d allocations ran during the drain, want exactly count - max_parallel = %d", job, w.fewest[job], floor)
		}
	}
}

// waitRunning waits until exactly want allocations of the job are wanted
// running and reported running by their agents, and returns the job's
// allocations.
func waitRunning(ctx context.Context, t *testing.T, conn grpc.ClientConnInterface, jobID string, want int) []*droverv1.Allocation {
	t.Helper()
	var allocs []*droverv1.Allocation
	poll(ctx, t, fmt.Sprintf("%d allocations of job %s running", want, jobID), func() (bool, string) {
		var err error
		if allocs, err = jobAllocs(ctx, conn, jobID); err != nil {
			return false, err.Error()
		}
		got := len(filterAllocs(allocs, isRunningWanted))
		return got == want && wantedRunning(allocs) == want, fmt.Sprintf("%d running, %d wanted running", got, wantedRunning(allocs))
	})
	return allocs
}

// stillOn counts the allocations that have not ended on their node.
func stillOn(allocs []*droverv1.Allocation) int {
	n := 0
	for _, a := range allocs {
		if !a.ClientTerminal() {
			n++
		}
	}
	return n
}

// drainWatch follows the jobs' allocations on the event stream from the
// first raft entry, and checks the drain's rules after every entry. Its
// results are final once entries.stop has returned.
type drainWatch struct {
	nodeID, systemJob   string
	counts, maxParallel map[string]int32
	entries             *entryFollower

	violations []error
	fewest     map[string]int32

	// Followed state.
	allocs   map[string]*droverv1.Allocation
	draining bool
}

func watchDrain(ctx context.Context, conn grpc.ClientConnInterface, nodeID, systemJob string, counts, maxParallel map[string]int32) *drainWatch {
	w := &drainWatch{
		nodeID: nodeID, systemJob: systemJob, counts: counts, maxParallel: maxParallel,
		fewest: make(map[string]int32), allocs: make(map[string]*droverv1.Allocation),
	}
	for job, count := range counts {
		w.fewest[job] = count
	}
	topics := []droverv1.Topic{droverv1.Topic_TOPIC_NODE, droverv1.Topic_TOPIC_ALLOCATION}
	w.entries = followEntries(ctx, conn, 1, topics, func(resp *droverv1.StreamEventsResponse) {
		for _, ev := range resp.GetEvents() {
			w.apply(ev)
		}
		w.check(resp.GetIndex())
	})
	return w
}

func (w *drainWatch) apply(ev *droverv1.Event) {
	switch p := ev.GetPayload().(type) {
	case *droverv1.Event_Allocation:
		a := p.Allocation
		if _, service := w.counts[a.GetJobId()]; !service && a.GetJobId() != w.systemJob {
			return
		}
		old := w.allocs[a.GetId()]
		if w.draining && a.GetJobId() == w.systemJob && a.GetNodeId() == w.nodeID && a.ServerTerminal() && !old.ServerTerminal() {
			for _, o := range w.allocs {
				if o.GetJobId() != w.systemJob && o.GetNodeId() == w.nodeID && !o.ClientTerminal() {
					w.violations = append(w.violations, fmt.Errorf("index %d: system allocation %s stopped while %s of job %s still ran on the node",
						ev.GetIndex(), a.GetId(), o.GetId(), o.GetJobId()))
				}
			}
		}
		w.allocs[a.GetId()] = a
	case *droverv1.Event_Node:
		if p.Node.GetId() == w.nodeID && p.Node.GetDrainStrategy() != nil {
			w.draining = true
		}
	}
}

// check runs after each whole entry.
func (w *drainWatch) check(index uint64) {
	if !w.draining {
		return
	}
	runs := make(map[string]int32)
	for _, a := range w.allocs {
		if isRunningWanted(a) {
			runs[a.GetJobId()]++
		}
	}
	for job, count := range w.counts {
		w.fewest[job] = min(w.fewest[job], runs[job])
		if floor := count - w.maxParallel[job]; runs[job] < floor {
			w.violations = append(w.violations, fmt.Errorf("index %d: job %s has %d allocations running, below count - max_parallel = %d", index, job, runs[job], floor))
		}
	}
}
