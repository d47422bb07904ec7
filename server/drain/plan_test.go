package drain

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// fakeState holds jobs and allocations in memory.
type fakeState struct {
	jobs   map[string]*droverv1.Job
	allocs []*droverv1.Allocation
}

func (f *fakeState) AllocsByNode(nodeID string) ([]*droverv1.Allocation, uint64) {
	return f.filter(func(a *droverv1.Allocation) bool { return a.GetNodeId() == nodeID }), 0
}

func (f *fakeState) AllocsByJob(jobID string) ([]*droverv1.Allocation, uint64) {
	return f.filter(func(a *droverv1.Allocation) bool { return a.GetJobId() == jobID }), 0
}

func (f *fakeState) JobByID(id string) *droverv1.Job { return f.jobs[id] }

func (f *fakeState) filter(keep func(*droverv1.Allocation) bool) []*droverv1.Allocation {
	var out []*droverv1.Allocation
	for _, a := range f.allocs {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

const (
	running  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	pending  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	complete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	now      = int64(1_000)
)

func job(id string, typ droverv1.JobType, count, maxParallel int32) *droverv1.Job {
	tg := &droverv1.TaskGroup{Name: "g", Count: count}
	if maxParallel > 0 {
		tg.Migrate = &droverv1.MigrateStrategy{MaxParallel: maxParallel}
	}
	return &droverv1.Job{Id: id, Type: typ, TaskGroups: []*droverv1.TaskGroup{tg}}
}

// alloc is allocation id of job on node, index i of group g, with the
// client status; opts adjust it.
func alloc(id, jobID, node string, i int, cs droverv1.AllocClientStatus, opts ...func(*droverv1.Allocation)) *droverv1.Allocation {
	a := &droverv1.Allocation{
		Id: id, JobId: jobID, NodeId: node, TaskGroup: "g", Name: fmt.Sprintf("%s.g[%d]", jobID, i),
		DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, ClientStatus: cs,
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

func marked(a *droverv1.Allocation) {
	a.DesiredTransition = &droverv1.DesiredTransition{Migrate: true}
}

func stopped(a *droverv1.Allocation) {
	marked(a)
	a.DesiredStatus = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP
}

func drainingNode(id string, opts ...func(*droverv1.DrainStrategy)) *droverv1.Node {
	ds := &droverv1.DrainStrategy{StartedAt: 1}
	for _, o := range opts {
		o(ds)
	}
	return &droverv1.Node{Id: id, DrainStrategy: ds}
}

func deadline(at int64) func(*droverv1.DrainStrategy) {
	return func(ds *droverv1.DrainStrategy) { ds.Deadline = at }
}

func ignoreSystem(ds *droverv1.DrainStrategy) { ds.IgnoreSystemJobs = true }

func TestDecide(t *testing.T) {
	service := droverv1.JobType_JOB_TYPE_SERVICE
	web := job("web", service, 3, 0)
	wide := job("web", service, 3, 2)
	pair := job("web", service, 4, 1)
	stoppedJob := job("web", service, 3, 0)
	stoppedJob.Stop = true
	batch := job("batch", droverv1.JobType_JOB_TYPE_BATCH, 1, 0)
	system := job("sys", droverv1.JobType_JOB_TYPE_SYSTEM, 1, 0)

	cases := []struct {
		name     string
		jobs     []*droverv1.Job
		allocs   []*droverv1.Allocation
		nodes    []*droverv1.Node
		migrate  []string
		jobsEval []string
		done     []string
	}{
		{
			name:   "one of a group at a time by default",
			jobs:   []*droverv1.Job{web},
			allocs: []*droverv1.Allocation{alloc("a2", "web", "n1", 2, running), alloc("a0", "web", "n1", 0, running), alloc("a1", "web", "n1", 1, running)},
			nodes:  []*droverv1.Node{drainingNode("n1")},
			// Lowest name first.
			migrate: []string{"a0"}, jobsEval: []string{"web"},
		},
		{
			name: "no more while the replacement is not running",
			jobs: []*droverv1.Job{web},
			allocs: []*droverv1.Allocation{
				alloc("a0", "web", "n1", 0, running, stopped), alloc("r0", "web", "n2", 0, pending),
				alloc("a1", "web", "n1", 1, running), alloc("a2", "web", "n1", 2, running),
			},
			nodes: []*droverv1.Node{drainingNode("n1")},
		},
		{
			name: "marked but not yet stopped counts as moving",
			jobs: []*droverv1.Job{web},
			allocs: []*droverv1.Allocation{
				alloc("a0", "web", "n1", 0, running, marked), alloc("a1", "web", "n1", 1, running), alloc("a2", "web", "n1", 2, running),
			},
			nodes: []*droverv1.Node{drainingNode("n1")},
		},
		{
			name: "the next one once the replacement runs",
			jobs: []*droverv1.Job{web},
			allocs: []*droverv1.Allocation{
				alloc("a0", "web", "n1", 0, complete, stopped), alloc("r0", "web", "n2", 0, running),
				alloc("a1", "web", "n1", 1, running), alloc("a2", "web", "n1", 2, running),
			},
			nodes:   []*droverv1.Node{drainingNode("n1")},
			migrate: []string{"a1"}, jobsEval: []string{"web"},
		},
		{
			name:    "max_parallel 2",
			jobs:    []*droverv1.Job{wide},
			allocs:  []*droverv1.Allocation{alloc("a0", "web", "n1", 0, running), alloc("a1", "web", "n1", 1, running), alloc("a2", "web", "n1", 2, running)},
			nodes:   []*droverv1.Node{drainingNode("n1")},
			migrate: []string{"a0", "a1"}, jobsEval: []string{"web"},
		},
		{
			name: "a group's turn spans its draining nodes",
			jobs: []*droverv1.Job{pair},
			allocs: []*droverv1.Allocation{
				alloc("b2", "web", "n2", 2, running), alloc("b3", "web", "n2", 3, running),
				alloc("a0", "web", "n1", 0, running), alloc("a1", "web", "n1", 1, running),
			},
			nodes:   []*droverv1.Node{drainingNode("n1"), drainingNode("n2")},
			migrate: []string{"a0"}, jobsEval: []string{"web"},
		},
		{
			name: "allocations not running move at once",
			jobs: []*droverv1.Job{web},
			allocs: []*droverv1.Allocation{
				alloc("a0", "web", "n1", 0, pending), alloc("a1", "web", "n1", 1, pending), alloc("a2", "web", "n2", 2, running),
			},
			nodes:   []*droverv1.Node{drainingNode("n1")},
			migrate: []string{"a0", "a1"}, jobsEval: []string{"web"},
		},
		{
			name:   "a stopped job's allocations are the schedulers' to stop",
			jobs:   []*droverv1.Job{stoppedJob},
			allocs: []*droverv1.Allocation{alloc("a0", "web", "n1", 0, running)},
			nodes:  []*droverv1.Node{drainingNode("n1")},
		},
		{
			name:   "batch work finishes where it runs",
			jobs:   []*droverv1.Job{batch},
			allocs: []*droverv1.Allocation{alloc("b0", "batch", "n1", 0, running)},
			nodes:  []*droverv1.Node{drainingNode("n1")},
		},
		{
			name:    "at the deadline everything left moves",
			jobs:    []*droverv1.Job{batch, web, system},
			allocs:  []*droverv1.Allocation{alloc("b0", "batch", "n1", 0, running), alloc("a0", "web", "n1", 0, running), alloc("a1", "web", "n1", 1, running), alloc("s0", "sys", "n1", 0, running)},
			nodes:   []*droverv1.Node{drainingNode("n1", deadline(now))},
			migrate: []string{"a0", "a1", "b0", "s0"}, jobsEval: []string{"batch", "sys", "web"},
		},
		{
			name:   "past the deadline the drain ends once everything is marked",
			jobs:   []*droverv1.Job{batch, system},
			allocs: []*droverv1.Allocation{alloc("b0", "batch", "n1", 0, running, marked), alloc("s0", "sys", "n1", 0, running, stopped)},
			nodes:  []*droverv1.Node{drainingNode("n1", deadline(now-1))},
			done:   []string{"n1"},
		},
		{
			name:   "system work waits for the rest",
			jobs:   []*droverv1.Job{batch, system},
			allocs: []*droverv1.Allocation{alloc("b0", "batch", "n1", 0, running), alloc("s0", "sys", "n1", 0, running)},
			nodes:  []*droverv1.Node{drainingNode("n1", deadline(now+1))},
		},
		{
			name:    "system work leaves last",
			jobs:    []*droverv1.Job{batch, system},
			allocs:  []*droverv1.Allocation{alloc("b0", "batch", "n1", 0, complete), alloc("s0", "sys", "n1", 0, running)},
			nodes:   []*droverv1.Node{drainingNode("n1")},
			migrate: []string{"s0"}, jobsEval: []string{"sys"},
		},
		{
			name:   "the drain waits for moving work to stop",
			jobs:   []*droverv1.Job{system},
			allocs: []*droverv1.Allocation{alloc("s0", "sys", "n1", 0, running, stopped)},
			nodes:  []*droverv1.Node{drainingNode("n1")},
		},
		{
			name:   "system work stays when the drain spares it, even past the deadline",
			jobs:   []*droverv1.Job{system},
			allocs: []*droverv1.Allocation{alloc("s0", "sys", "n1", 0, running)},
			nodes:  []*droverv1.Node{drainingNode("n1", ignoreSystem, deadline(now-1)), drainingNode("n2", ignoreSystem)},
			done:   []string{"n1", "n2"},
		},
		{
			name:   "a node with only finished work is done",
			jobs:   []*droverv1.Job{web},
			allocs: []*droverv1.Allocation{alloc("a0", "web", "n1", 0, complete, stopped), alloc("a1", "web", "n2", 1, running)},
			nodes:  []*droverv1.Node{drainingNode("n1"), drainingNode("n3")},
			done:   []string{"n1", "n3"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &fakeState{jobs: make(map[string]*droverv1.Job), allocs: tc.allocs}
			for _, j := range tc.jobs {
				st.jobs[j.GetId()] = j
			}
			p := Decide(st, tc.nodes, now)
			var migrate, done []string
			jobs := make(map[string]bool)
			for _, a := range p.Migrate {
				migrate = append(migrate, a.GetId())
				jobs[a.GetJobId()] = true
			}
			jobIDs := slices.Sorted(maps.Keys(jobs))
			for _, n := range p.Done {
				done = append(done, n.GetId())
			}
			if !slices.Equal(migrate, tc.migrate) || !slices.Equal(jobIDs, tc.jobsEval) || !slices.Equal(done, tc.done) {
				t.Errorf("migrate %v of jobs %v, done %v; want %v of %v, %v", migrate, jobIDs, done, tc.migrate, tc.jobsEval, tc.done)
			}
		})
	}
}
