package state

import (
	"slices"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	pending = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	failed  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
)

// gc applies the entry and fails the test on an error.
func (f *fixture) gc(e *droverv1.GCEntry) *GCResult {
	f.t.Helper()
	res, _, err := f.s.ApplyGC(f.next(), e)
	if err != nil {
		f.t.Fatalf("apply GC entry %v: %v", e, err)
	}
	return res
}

// stopAllocs asks for the allocations to stop, recording them lost if
// lost is set, as a committed plan would.
func (f *fixture) stopAllocs(lost bool, allocs ...*droverv1.Allocation) {
	f.t.Helper()
	e := &droverv1.PlanResultEntry{AppliedAt: 6}
	for _, a := range allocs {
		s := &droverv1.AllocStop{AllocId: a.GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP}
		if lost {
			s.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
		}
		e.Stops = append(e.Stops, s)
	}
	if _, err := f.s.UpsertPlanResults(f.next(), e); err != nil {
		f.t.Fatalf("stop allocations: %v", err)
	}
}

// stopJob deregisters the job.
func (f *fixture) stopJob(job *droverv1.Job) {
	f.t.Helper()
	e := &droverv1.JobDeregisterEntry{JobId: job.GetId(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER)}
	if _, _, err := f.s.DeregisterJob(f.next(), e); err != nil {
		f.t.Fatalf("stop job %s: %v", job.GetId(), err)
	}
}

// newVersion registers a changed specification of the job and returns the
// new version as stored.
func (f *fixture) newVersion(job *droverv1.Job) *droverv1.Job {
	f.t.Helper()
	j := job.CloneVT()
	j.TaskGroups[0].Count++
	f.register(j)
	return f.s.Snapshot().JobByID(job.GetId())
}

// versionsOf lists the stored versions of a job.
func versionsOf(snap *Snapshot, jobID string) []uint64 {
	var out []uint64
	for v := range snap.JobVersions(jobID) {
		out = append(out, v.GetVersion())
	}
	slices.Sort(out)
	return out
}

// setRow reads the allocation-set row of a node or job as stored, nil when
// there is none: the snapshot's reads hide an empty row.
func setRow(s *StateStore, table, key string) *allocSet {
	if table == tableNodeSetTree {
		return s.Snapshot().nodeSet(key)
	}
	obj, err := s.db.Load().Txn(false).First(table, indexID, key)
	if err != nil {
		return nil
	}
	set, _ := obj.(*allocSet)
	return set
}

// Allocations are deleted only once client-terminal: until then their
// agent may hold their resources, whatever the servers want.
func TestApplyGCAllocs(t *testing.T) {
	cases := []struct {
		name  string
		setup func(f *fixture, n *droverv1.Node, a *droverv1.Allocation)
		want  bool // deleted
	}{
		{"pending", func(*fixture, *droverv1.Node, *droverv1.Allocation) {}, false},
		{"running", func(f *fixture, n *droverv1.Node, a *droverv1.Allocation) { f.report(n.GetId(), running, a.GetId()) }, false},
		{"unknown", func(f *fixture, n *droverv1.Node, a *droverv1.Allocation) {
			f.report(n.GetId(), running, a.GetId())
			f.disconnect(n.GetId())
		}, false},
		{"wanted stopped, still running", func(f *fixture, n *droverv1.Node, a *droverv1.Allocation) {
			f.report(n.GetId(), running, a.GetId())
			f.stopAllocs(false, a)
		}, false},
		{"complete", func(f *fixture, n *droverv1.Node, a *droverv1.Allocation) { f.report(n.GetId(), complete, a.GetId()) }, true},
		{"failed", func(f *fixture, n *droverv1.Node, a *droverv1.Allocation) { f.report(n.GetId(), failed, a.GetId()) }, true},
		{"stopped as lost", func(f *fixture, _ *droverv1.Node, a *droverv1.Allocation) { f.stopAllocs(true, a) }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			f.setStatus(n.GetId(), ready)
			job := f.mcdJob(time.Hour)
			placed := f.place(mock.Alloc(n, job, 0), mock.Alloc(n, job, 1))
			a, stays := placed[0], placed[1]
			tc.setup(f, n, a)
			before := f.s.Snapshot().AllocByID(a.GetId())

			index := f.next()
			res, changes, err := f.s.ApplyGC(index, &droverv1.GCEntry{AllocIds: []string{a.GetId(), mock.ID()}})
			if err != nil {
				t.Fatal(err)
			}
			snap := f.s.Snapshot()
			onNode, nodeIndex := snap.AllocsByNode(n.GetId())
			ofJob, _ := snap.AllocsByJob(job.GetId())
			if !tc.want {
				if res.Allocs != 0 || len(changes) != 0 || snap.AllocByID(a.GetId()) == nil {
					t.Fatalf("%s allocation deleted (result %+v, changes %v)", before.GetClientStatus(), res, changes)
				}
				if len(onNode) != 2 || len(ofJob) != 2 {
					t.Errorf("sets hold %d on the node and %d of the job, want 2 and 2", len(onNode), len(ofJob))
				}
				return
			}
			if res.Allocs != 1 || snap.AllocByID(a.GetId()) != nil {
				t.Fatalf("result %+v, stored %v; want the allocation deleted", res, snap.AllocByID(a.GetId()))
			}
			if len(changes) != 1 || !changes[0].Deleted || changes[0].Table != TableAllocs {
				t.Errorf("changes = %v, want the allocation's deletion", changes)
			}
			want := []string{stays.GetId()}
			if !slices.Equal(ids(onNode), want) || !slices.Equal(ids(ofJob), want) {
				t.Errorf("sets hold %v on the node and %v of the job, want %v", ids(onNode), ids(ofJob), want)
			}
			// A removal is a server-side change of the node's allocations.
			if nodeIndex != index {
				t.Errorf("node's alloc index = %d, want %d", nodeIndex, index)
			}
		})
	}
}

// Evaluations are deleted only once they will never run again.
func TestApplyGCEvals(t *testing.T) {
	cases := []struct {
		status droverv1.EvalStatus
		want   bool
	}{
		{droverv1.EvalStatus_EVAL_STATUS_PENDING, false},
		{droverv1.EvalStatus_EVAL_STATUS_BLOCKED, false},
		{droverv1.EvalStatus_EVAL_STATUS_COMPLETE, true},
		{droverv1.EvalStatus_EVAL_STATUS_FAILED, true},
		{droverv1.EvalStatus_EVAL_STATUS_CANCELED, true},
	}
	for _, tc := range cases {
		t.Run(tc.status.String(), func(t *testing.T) {
			f := newFixture(t)
			job := f.job(1)
			ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
			ev.Status = tc.status
			if _, err := f.s.UpsertEvals(f.next(), &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{ev}}); err != nil {
				t.Fatal(err)
			}
			res := f.gc(&droverv1.GCEntry{EvalIds: []string{ev.GetId(), mock.ID()}})
			gone := f.s.Snapshot().EvalByID(ev.GetId()) == nil
			if gone != tc.want || res.Evals != btoi(tc.want) {
				t.Errorf("deleted = %v (result %+v), want %v", gone, res, tc.want)
			}
		})
	}
}

// A node is deleted only while down with every allocation terminal. Its
// allocation-set row goes with it once nothing is left in it.
func TestApplyGCNodes(t *testing.T) {
	type setup func(f *fixture, n *droverv1.Node, job *droverv1.Job) []*droverv1.Allocation
	place := func(client droverv1.AllocClientStatus, stop, lost bool) setup {
		return func(f *fixture, n *droverv1.Node, job *droverv1.Job) []*droverv1.Allocation {
			a := f.place(mock.Alloc(n, job, 0))[0]
			if client != pending {
				f.report(n.GetId(), client, a.GetId())
			}
			if stop {
				f.stopAllocs(lost, a)
			}
			return []*droverv1.Allocation{a}
		}
	}
	none := func(*fixture, *droverv1.Node, *droverv1.Job) []*droverv1.Allocation { return nil }
	cases := []struct {
		name   string
		status droverv1.NodeStatus
		allocs setup
		// collectAllocs puts the node's allocations in the entry too.
		collectAllocs bool
		want          bool
		// wantRow says the node's allocation-set row is left (with allocations).
		wantRow bool
	}{
		{name: "ready", status: ready, allocs: none},
		{name: "initializing", status: initializing, allocs: none},
		{name: "disconnected", status: disconnected, allocs: none},
		{name: "down without allocations", status: down, allocs: none, want: true},
		{name: "down with a running allocation", status: down, allocs: place(running, false, false), wantRow: true},
		{name: "down with a pending allocation", status: down, allocs: place(pending, false, false), wantRow: true},
		{name: "down with a stopped allocation still running", status: down, allocs: place(running, true, false), want: true, wantRow: true},
		{name: "down with a complete allocation", status: down, allocs: place(complete, false, false), want: true, wantRow: true},
		{name: "down with a lost allocation", status: down, allocs: place(running, true, true), want: true, wantRow: true},
		{name: "down, lost allocation collected too", status: down, allocs: place(running, true, true), collectAllocs: true, want: true},
		{name: "down, running allocation named too", status: down, allocs: place(running, false, false), collectAllocs: true, wantRow: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			job := f.job(1)
			f.setStatus(n.GetId(), ready)
			allocs := tc.allocs(f, n, job)
			if tc.status != ready {
				f.setStatus(n.GetId(), tc.status)
			}
			nodesBefore := f.s.NodeCount()
			e := &droverv1.GCEntry{NodeIds: []string{n.GetId(), mock.ID()}}
			if tc.collectAllocs {
				e.AllocIds = ids(allocs)
			}
			res := f.gc(e)

			snap := f.s.Snapshot()
			gone := snap.NodeByID(n.GetId()) == nil
			if gone != tc.want || res.Nodes != btoi(tc.want) {
				t.Fatalf("node deleted = %v (result %+v), want %v", gone, res, tc.want)
			}
			if got := f.s.NodeCount(); got != nodesBefore-btoi(tc.want) {
				t.Errorf("node count = %d, want %d", got, nodesBefore-btoi(tc.want))
			}
			row := setRow(f.s, tableNodeSetTree, n.GetId())
			if (row != nil) != tc.wantRow {
				t.Errorf("node's allocation-set row = %v, want one: %v", row, tc.wantRow)
			}
			onNode, index := snap.AllocsByNode(n.GetId())
			if !tc.wantRow && (len(onNode) != 0 || index != 1) {
				t.Errorf("AllocsByNode = %v at %d, want nothing at index 1", ids(onNode), index)
			}
			if tc.wantRow && len(onNode) != len(allocs) {
				t.Errorf("AllocsByNode = %v, want %v kept", ids(onNode), ids(allocs))
			}
		})
	}
}

// A job is purged with every version only while it is over (stopped, or a
// finished batch job) with no allocation its agent may still run.
func TestApplyGCJobs(t *testing.T) {
	batch := func(f *fixture) *droverv1.Job {
		j := mock.Job(1)
		j.Type = droverv1.JobType_JOB_TYPE_BATCH
		f.register(j)
		return f.s.Snapshot().JobByID(j.GetId())
	}
	service := func(f *fixture) *droverv1.Job { return f.newVersion(f.job(1)) }
	cases := []struct {
		name string
		job  func(f *fixture) *droverv1.Job
		// client is the status of the job's one allocation, none if zero.
		client  droverv1.AllocClientStatus
		stopped bool // the job is stopped
		revived bool // and registered again
		// collectAllocs puts the job's allocations in the entry too.
		collectAllocs bool
		want          bool
		wantRow       bool
	}{
		{name: "running service", job: service, client: running, wantRow: true},
		{name: "service without allocations", job: service},
		{name: "stopped without allocations", job: service, stopped: true, want: true},
		{name: "stopped, allocation still running", job: service, client: running, stopped: true, wantRow: true},
		{name: "stopped, allocation pending", job: service, client: pending, stopped: true, wantRow: true},
		{name: "stopped, allocation complete", job: service, client: complete, stopped: true, want: true, wantRow: true},
		{name: "stopped, allocation complete and collected", job: service, client: complete, stopped: true, collectAllocs: true, want: true},
		{name: "stopped, then registered again", job: service, stopped: true, revived: true},
		{name: "finished batch job", job: batch, client: complete, want: true, wantRow: true},
		{name: "finished batch job with its allocation", job: batch, client: complete, collectAllocs: true, want: true},
		{name: "running batch job", job: batch, client: running, wantRow: true},
		{name: "batch job not yet placed", job: batch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			f.setStatus(n.GetId(), ready)
			job := tc.job(f)
			var allocs []*droverv1.Allocation
			if tc.client != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED {
				allocs = f.place(mock.Alloc(n, job, 0))
				if tc.client != pending {
					f.report(n.GetId(), tc.client, allocs[0].GetId())
				}
			}
			if tc.stopped {
				f.stopJob(job)
			}
			if tc.revived {
				f.register(job)
			}
			versions := versionsOf(f.s.Snapshot(), job.GetId())
			e := &droverv1.GCEntry{JobIds: []string{job.GetId(), "no-such-job"}}
			if tc.collectAllocs {
				e.AllocIds = ids(allocs)
			}
			res := f.gc(e)

			snap := f.s.Snapshot()
			gone := snap.JobByID(job.GetId()) == nil
			if gone != tc.want || res.Jobs != btoi(tc.want) {
				t.Fatalf("job deleted = %v (result %+v), want %v", gone, res, tc.want)
			}
			left := versionsOf(snap, job.GetId())
			switch {
			case tc.want && len(left) != 0:
				t.Errorf("versions %v left of a deleted job", left)
			case !tc.want && !slices.Equal(left, versions):
				t.Errorf("versions %v, want %v kept", left, versions)
			}
			if res.JobVersions != 0 {
				t.Errorf("result counts %d job versions; a purged job's versions go with it", res.JobVersions)
			}
			row := setRow(f.s, tableJobAllocs, job.GetId())
			if (row != nil) != tc.wantRow {
				t.Errorf("job's allocation-set row = %v, want one: %v", row, tc.wantRow)
			}
			ofJob, index := snap.AllocsByJob(job.GetId())
			if !tc.wantRow && (len(ofJob) != 0 || index != 1) {
				t.Errorf("AllocsByJob = %v at %d, want nothing at index 1", ids(ofJob), index)
			}
		})
	}
}

// An old version of a job goes only if it is not current and no
// allocation, after the entry's own deletions, runs it.
func TestApplyGCJobVersions(t *testing.T) {
	// The job has versions 0, 1 and 2 (current); its one allocation runs 0.
	cases := []struct {
		name    string
		version uint64
		// collectAlloc makes the allocation complete and collects it in
		// the same entry.
		collectAlloc bool
		want         bool
	}{
		{name: "old, unused", version: 1, want: true},
		{name: "current", version: 2},
		{name: "run by an allocation", version: 0},
		{name: "run by an allocation collected first", version: 0, collectAlloc: true, want: true},
		{name: "unknown version", version: 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			f.setStatus(n.GetId(), ready)
			v0 := f.job(1)
			a := f.place(mock.Alloc(n, v0, 0))[0]
			f.newVersion(f.newVersion(v0))
			e := &droverv1.GCEntry{JobVersions: []*droverv1.JobVersionRef{{JobId: v0.GetId(), Version: tc.version}}}
			if tc.collectAlloc {
				f.report(n.GetId(), complete, a.GetId())
				e.AllocIds = []string{a.GetId()}
			}
			res := f.gc(e)

			want := []uint64{0, 1, 2}
			if tc.want {
				want = slices.DeleteFunc(want, func(v uint64) bool { return v == tc.version })
			}
			if left := versionsOf(f.s.Snapshot(), v0.GetId()); !slices.Equal(left, want) || res.JobVersions != btoi(tc.want) {
				t.Errorf("versions left %v (result %+v), want %v", left, res, want)
			}
			if got := f.s.Snapshot().JobByID(v0.GetId()).GetVersion(); got != 2 {
				t.Errorf("the job's current version is %d, want 2", got)
			}
		})
	}
}

// An entry naming many objects deletes what is collectable and keeps the
// rest, and fails as a whole on nothing.
func TestApplyGCMixedEntry(t *testing.T) {
	f := newFixture(t)
	gone, kept := f.node(), f.node()
	f.setStatus(gone.GetId(), ready)
	f.setStatus(kept.GetId(), ready)
	job := f.job(2)
	placed := f.place(mock.Alloc(gone, job, 0), mock.Alloc(kept, job, 1))
	f.report(kept.GetId(), running, placed[1].GetId())
	f.setStatus(gone.GetId(), down)
	f.stopAllocs(true, placed[0])
	f.stopJob(job)
	done := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	done.Status = droverv1.EvalStatus_EVAL_STATUS_COMPLETE
	if _, err := f.s.UpsertEvals(f.next(), &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{done}}); err != nil {
		t.Fatal(err)
	}

	res, changes, err := f.s.ApplyGC(f.next(), &droverv1.GCEntry{
		NodeIds:  []string{gone.GetId(), kept.GetId()},
		AllocIds: ids(placed),
		EvalIds:  []string{done.GetId()},
		JobIds:   []string{job.GetId()}, // kept: its allocation on kept still runs
	})
	if err != nil {
		t.Fatal(err)
	}
	want := GCResult{Nodes: 1, Allocs: 1, Evals: 1}
	if *res != want {
		t.Errorf("result %+v, want %+v", *res, want)
	}
	deleted := map[string]int{}
	for _, c := range changes {
		if !c.Deleted {
			t.Errorf("change %s %v is not a deletion", c.Table, c.Object)
		}
		deleted[c.Table]++
	}
	if deleted[TableNodes] != 1 || deleted[TableAllocs] != 1 || deleted[TableEvals] != 1 || deleted[TableJobs] != 0 {
		t.Errorf("deletions by table = %v", deleted)
	}
	snap := f.s.Snapshot()
	if snap.NodeByID(gone.GetId()) != nil || snap.NodeByID(kept.GetId()) == nil || snap.JobByID(job.GetId()) == nil {
		t.Errorf("wrong objects deleted")
	}
	if setRow(f.s, tableNodeSetTree, gone.GetId()) != nil {
		t.Errorf("the deleted node's allocation-set row lingers")
	}
}

// Ids the store does not hold, malformed ones included, delete nothing and
// are no error: the objects may have gone since the entry was planned.
func TestApplyGCUnknownIDs(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	res, changes, err := f.s.ApplyGC(f.next(), &droverv1.GCEntry{
		NodeIds: []string{"x"}, AllocIds: []string{"x"}, EvalIds: []string{"x"}, JobIds: []string{""},
		JobVersions: []*droverv1.JobVersionRef{{JobId: "x", Version: 1}},
	})
	if err != nil || *res != (GCResult{}) || len(changes) != 0 {
		t.Errorf("ApplyGC = %+v, %v, %v; want nothing done", res, changes, err)
	}
	if f.s.Snapshot().NodeByID(n.GetId()) == nil {
		t.Errorf("unrelated node deleted")
	}
}

// The allocation-set row of a node or job deleted while allocations were
// left on it goes once a later entry collects the last of them: a deleted
// node's allocations outlive it when they were not yet client-terminal
// (the scheduler marks them lost later), and a job's when the planner's
// batches split them off.
func TestApplyGCDropsRowsEmptiedLater(t *testing.T) {
	t.Run("node", func(t *testing.T) {
		f := newFixture(t)
		n := f.node()
		f.setStatus(n.GetId(), ready)
		job := f.job(1)
		a := f.place(mock.Alloc(n, job, 0))[0]
		f.report(n.GetId(), running, a.GetId())
		f.stopAllocs(false, a)
		f.setStatus(n.GetId(), down)
		if res := f.gc(&droverv1.GCEntry{NodeIds: []string{n.GetId()}, AllocIds: []string{a.GetId()}}); res.Nodes != 1 || res.Allocs != 0 {
			t.Fatalf("first entry: %+v, want the node deleted and the allocation kept", res)
		}
		// The scheduler finds the node gone and records the allocation lost.
		f.stopAllocs(true, a)
		if res := f.gc(&droverv1.GCEntry{AllocIds: []string{a.GetId()}}); res.Allocs != 1 {
			t.Fatalf("second entry: %+v, want the allocation deleted", res)
		}
		if row := setRow(f.s, tableNodeSetTree, n.GetId()); row != nil {
			t.Errorf("the deleted node's emptied allocation-set row lingers: %+v", row)
		}
		if allocs, index := f.s.Snapshot().AllocsByNode(n.GetId()); len(allocs) != 0 || index != 1 {
			t.Errorf("AllocsByNode of the deleted node = %v at %d, want nothing at index 1", ids(allocs), index)
		}
	})
	t.Run("job", func(t *testing.T) {
		f := newFixture(t)
		n := f.node()
		f.setStatus(n.GetId(), ready)
		job := f.job(1)
		a := f.place(mock.Alloc(n, job, 0))[0]
		f.report(n.GetId(), complete, a.GetId())
		f.stopJob(job)
		if res := f.gc(&droverv1.GCEntry{JobIds: []string{job.GetId()}}); res.Jobs != 1 {
			t.Fatalf("first entry: %+v, want the job deleted", res)
		}
		if res := f.gc(&droverv1.GCEntry{AllocIds: []string{a.GetId()}}); res.Allocs != 1 {
			t.Fatalf("second entry: %+v, want the allocation deleted", res)
		}
		if row := setRow(f.s, tableJobAllocs, job.GetId()); row != nil {
			t.Errorf("the deleted job's emptied allocation-set row lingers: %+v", row)
		}
	})
}

// Deleting an old version of a job that never had allocations leaves no
// allocation-set row behind for it.
func TestApplyGCVersionWritesNoRow(t *testing.T) {
	f := newFixture(t)
	v0 := f.job(1)
	f.newVersion(v0)
	_, indexBefore := f.s.Snapshot().AllocsByJob(v0.GetId())
	if res := f.gc(&droverv1.GCEntry{JobVersions: []*droverv1.JobVersionRef{{JobId: v0.GetId(), Version: 0}}}); res.JobVersions != 1 {
		t.Fatalf("result %+v, want version 0 deleted", res)
	}
	if row := setRow(f.s, tableJobAllocs, v0.GetId()); row != nil {
		t.Errorf("an allocation-set row appeared for a job without allocations: %+v", row)
	}
	if _, index := f.s.Snapshot().AllocsByJob(v0.GetId()); index != indexBefore {
		t.Errorf("AllocsByJob index moved %d -> %d though no allocation changed", indexBefore, index)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
