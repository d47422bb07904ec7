package state

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// watchNode starts a blocking query on a node's allocations from minIndex
// and reports each pass through the query, and the final index.
func watchNode(ctx context.Context, s *StateStore, nodeID string, minIndex uint64) (passes <-chan uint64, done <-chan uint64) {
	passCh := make(chan uint64, 100)
	doneCh := make(chan uint64, 1)
	go func() {
		idx, _ := s.BlockingQuery(ctx, minIndex, func(snap *Snapshot) (uint64, error) {
			_, index := snap.AllocsByNode(nodeID)
			passCh <- index
			return index, nil
		})
		doneCh <- idx
	}()
	return passCh, doneCh
}

func TestBlockingQueryWakesOnlyForItsNode(t *testing.T) {
	f := newFixture(t)
	n1, n2 := f.node(), f.node()
	job := f.job(2)
	f.place(mock.Alloc(n1, job, 0))
	_, start := f.s.Snapshot().AllocsByNode(n1.GetId())

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	passes, done := watchNode(ctx, f.s, n1.GetId(), start)
	if got := <-passes; got != start {
		t.Fatalf("first pass index = %d, want %d", got, start)
	}

	// Writes that do not touch n1's allocations: another node's placement,
	// a job write, and n1's agent reporting its own status.
	n1Alloc, _ := f.s.Snapshot().AllocsByNode(n1.GetId())
	f.place(mock.Alloc(n2, job, 1))
	f.job(1)
	f.report(n1.GetId(), running, n1Alloc[0].GetId())
	// A server-side change to n1's allocations wakes it.
	placed := f.place(mock.Alloc(n1, job, 2))

	got := <-done
	if got != placed[0].GetAllocModifyIndex() {
		t.Errorf("query returned index %d, want %d", got, placed[0].GetAllocModifyIndex())
	}
	// Unrelated writes may cause a spurious re-run in go-memdb only when
	// they restructure a shared radix node; they must never end the query.
	for len(passes) > 0 {
		if idx := <-passes; idx != start && idx != got {
			t.Errorf("a pass saw index %d", idx)
		}
	}
}

func TestBlockingQueryReturnsLastResultWhenContextEnds(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	ctx, cancel := context.WithCancel(t.Context())
	passes, done := watchNode(ctx, f.s, n.GetId(), 1)
	<-passes
	cancel()
	if got := <-done; got != 1 {
		t.Errorf("index = %d, want 1 (a node without allocations)", got)
	}
}

func TestBlockingQueryWakesOnRestore(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	passes, done := watchNode(ctx, f.s, n.GetId(), 1)
	<-passes

	// Restore a state in which the node holds an allocation.
	other := newFixture(t)
	other.index = 100
	if _, err := upsertNode(other.s, other.next(), n.CloneVT(), 0); err != nil {
		t.Fatal(err)
	}
	job := other.job(1)
	other.place(mock.Alloc(n, job, 0))
	r, err := f.s.Restore()
	if err != nil {
		t.Fatal(err)
	}
	snap := other.s.Snapshot()
	for x := range snap.Nodes() {
		mustNil(t, r.Node(x))
	}
	for x := range snap.Jobs() {
		mustNil(t, r.Job(x))
	}
	for x := range snap.AllJobVersions() {
		mustNil(t, r.JobVersion(x))
	}
	for x := range snap.Allocs() {
		mustNil(t, r.Alloc(x))
	}
	r.Commit(other.index)

	if got := <-done; got != other.index {
		t.Errorf("index after restore = %d, want %d", got, other.index)
	}
	if f.s.LatestIndex() != other.index {
		t.Errorf("latest index = %d, want %d", f.s.LatestIndex(), other.index)
	}
	allocs, _ := f.s.Snapshot().AllocsByNode(n.GetId())
	if len(allocs) != 1 {
		t.Errorf("restored node holds %d allocations, want 1", len(allocs))
	}
}

func TestSnapshotMinIndex(t *testing.T) {
	f := newFixture(t)
	f.node()

	snap, err := f.s.SnapshotMinIndex(t.Context(), f.index)
	if err != nil || snap.Index() < f.index {
		t.Fatalf("reached index: snap at %d, err %v", snap.Index(), err)
	}

	want := f.index + 1
	got := make(chan *Snapshot, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, err := f.s.SnapshotMinIndex(ctx, want)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	n := f.node()
	s := <-got
	if s == nil || s.NodeByID(n.GetId()) == nil {
		t.Fatalf("snapshot at %d does not hold the write it waited for", want)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	_, err = f.s.SnapshotMinIndex(ctx, 1000)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want one wrapping context.DeadlineExceeded", err)
	}
}

func TestFailedWriteStillCountsAsApplied(t *testing.T) {
	f := newFixture(t)
	index := f.next()
	if _, err := f.s.UpdateNodeStatus(index, &droverv1.NodeStatusEntry{NodeId: mock.ID(), Status: ready}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := f.s.SnapshotMinIndex(ctx, index); err != nil {
		t.Errorf("waiting for a refused entry's index: %v", err)
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fired reports whether any channel of the watch set has been closed.
func fired(ws memdb.WatchSet) bool {
	for ch := range ws {
		select {
		case <-ch:
			return true
		default:
		}
	}
	return false
}

// TestAllocsByNodeWatchIgnoresAgentReports: an agent's GetAllocs waits on
// AllocsByNode, which must not wake for the agent's own reports (each would
// cost a pass that finds the index unchanged, which reports do not move)
// nor for other nodes, but must for every server-side change to the node.
func TestAllocsByNodeWatchIgnoresAgentReports(t *testing.T) {
	tests := []struct {
		name  string
		write func(f *fixture, node *droverv1.Node, job *droverv1.Job, placed *droverv1.Allocation)
		wake  bool
	}{
		{"its own report", func(f *fixture, n *droverv1.Node, _ *droverv1.Job, a *droverv1.Allocation) {
			f.report(n.GetId(), running, a.GetId())
		}, false},
		{"another node's placement", func(f *fixture, _ *droverv1.Node, j *droverv1.Job, _ *droverv1.Allocation) {
			f.place(mock.Alloc(f.node(), j, 1))
		}, false},
		{"a placement on the node", func(f *fixture, n *droverv1.Node, j *droverv1.Job, _ *droverv1.Allocation) {
			f.place(mock.Alloc(n, j, 1))
		}, true},
		{"the servers stop its allocation", func(f *fixture, _ *droverv1.Node, _ *droverv1.Job, a *droverv1.Allocation) {
			f.stopAllocs(false, a)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			n, job := f.node(), f.job(2)
			placed := f.place(mock.Alloc(n, job, 0))[0]
			ws := memdb.NewWatchSet()
			allocs, _ := f.s.snapshot(ws).AllocsByNode(n.GetId())
			if len(allocs) != 1 {
				t.Fatalf("read %d allocations, want 1", len(allocs))
			}
			tt.write(f, n, job, placed)
			if got := fired(ws); got != tt.wake {
				t.Errorf("watch fired %v, want %v", got, tt.wake)
			}
		})
	}
}

// TestAllocsByNodeWatchWithoutASet: a node that never held an allocation
// has no set, so its query watches the place of the set's mark and wakes
// for the first placement; a query on a set the GC then removes wakes when
// it goes, though no later set replaces it.
func TestAllocsByNodeWatchWithoutASet(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	f.setStatus(n.GetId(), ready)
	job := f.job(1)
	watch := func() memdb.WatchSet {
		ws := memdb.NewWatchSet()
		f.s.snapshot(ws).AllocsByNode(n.GetId())
		return ws
	}

	ws := watch()
	a := f.place(mock.Alloc(n, job, 0))[0]
	if !fired(ws) {
		t.Error("the first placement on the node did not wake its watch")
	}

	f.stopAllocs(false, a)
	f.setStatus(n.GetId(), down)
	if res := f.gc(&droverv1.GCEntry{NodeIds: []string{n.GetId()}}); res.Nodes != 1 {
		t.Fatalf("GC of the node: %+v, want it deleted", res)
	}
	f.stopAllocs(true, a) // as the scheduler records it lost
	ws = watch()
	if res := f.gc(&droverv1.GCEntry{AllocIds: []string{a.GetId()}}); res.Allocs != 1 {
		t.Fatalf("GC of the allocation: %+v, want it deleted", res)
	}
	if row := setRow(f.s, tableNodeSetTree, n.GetId()); row != nil {
		t.Fatalf("the deleted node's set lingers: %+v", row)
	}
	if !fired(ws) {
		t.Error("removing the node's set did not wake its watch")
	}
}
