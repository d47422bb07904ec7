package state

import (
	"slices"
	"strings"
	"testing"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestNodeAllocsSharedIdentity checks the contract the scheduler's usage
// cache relies on: a node's shared row keeps its backing array while
// nothing on the node changes (a write elsewhere included), and gets a new
// one on any change of the node's allocations, an agent's report included.
func TestNodeAllocsSharedIdentity(t *testing.T) {
	f := newFixture(t)
	n, other := f.node(), f.node()
	job := f.job(3)
	if got := f.s.Snapshot().NodeAllocsShared(n.GetId()); got != nil {
		t.Fatalf("row of a node without allocations = %v, want nil", got)
	}
	a := f.place(mock.Alloc(n, job, 0), mock.Alloc(n, job, 1))[0]
	before := f.s.Snapshot().NodeAllocsShared(n.GetId())
	copied, _ := f.s.Snapshot().AllocsByNode(n.GetId())
	if !slices.Equal(before, copied) {
		t.Fatalf("shared row %v differs from AllocsByNode %v", ids(before), ids(copied))
	}
	if &copied[0] == &before[0] {
		t.Fatalf("AllocsByNode returned the shared row, not a copy")
	}

	f.place(mock.Alloc(other, job, 2))
	if same := f.s.Snapshot().NodeAllocsShared(n.GetId()); &same[0] != &before[0] || len(same) != len(before) {
		t.Fatalf("a placement on another node gave the node a new row")
	}

	f.report(n.GetId(), running, a.GetId())
	after := f.s.Snapshot().NodeAllocsShared(n.GetId())
	if &after[0] == &before[0] {
		t.Fatalf("an agent's report kept the node's row array")
	}
	if old := byID(before, a.GetId()); old.GetClientStatus() == running {
		t.Fatalf("the old row was changed in place: %v", old)
	}
	if reported := byID(after, a.GetId()); reported.GetClientStatus() != running {
		t.Fatalf("new row holds %v, want the reported version", reported)
	}
}

func byID(allocs []*droverv1.Allocation, id string) *droverv1.Allocation {
	for _, a := range allocs {
		if a.GetId() == id {
			return a
		}
	}
	return nil
}

// TestNodesWithAllocs checks that the ordered walk gives every node, in id
// order, the very row NodeAllocsShared gives it: nodes with allocations
// and without, at the ends of the order and between, and that it stops
// when asked to.
func TestNodesWithAllocs(t *testing.T) {
	f := newFixture(t)
	job := f.job(100)
	var nodes []*droverv1.Node
	for range 40 {
		nodes = append(nodes, f.node())
	}
	slices.SortFunc(nodes, func(a, b *droverv1.Node) int { return strings.Compare(a.GetId(), b.GetId()) })
	// Allocations on the first and the last node and on every third one
	// between; the others hold none.
	var placed []*droverv1.Allocation
	for i, n := range nodes {
		if i == 0 || i == len(nodes)-1 || i%3 == 1 {
			placed = append(placed, mock.Alloc(n, job, len(placed)), mock.Alloc(n, job, len(placed)+1))
		}
	}
	f.place(placed...)
	snap := f.s.Snapshot()
	var got []string
	for n, row := range snap.NodesWithAllocs() {
		got = append(got, n.GetId())
		want := snap.NodeAllocsShared(n.GetId())
		if len(row) != len(want) || len(row) > 0 && &row[0] != &want[0] {
			t.Errorf("node %s: row of %d allocations, want the shared row of %d", n.GetId(), len(row), len(want))
		}
	}
	var want []string
	for _, n := range nodes {
		want = append(want, n.GetId())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked nodes %v, want %v", got, want)
	}
	walked := 0
	for range snap.NodesWithAllocs() {
		walked++
		if walked == 5 {
			break
		}
	}
	if walked != 5 {
		t.Fatalf("walk went on to %d nodes after the loop broke at 5", walked)
	}
}

// TestNodesWithAllocsWatched checks the walk in a blocking query: it gives
// the same rows and watches each node's, so that a placement on a node,
// with or without allocations before, wakes the query.
func TestNodesWithAllocsWatched(t *testing.T) {
	for _, held := range []bool{true, false} {
		f := newFixture(t)
		job := f.job(10)
		n, other := f.node(), f.node()
		f.place(mock.Alloc(other, job, 0))
		if held {
			f.place(mock.Alloc(n, job, 1))
		}
		ws := memdb.NewWatchSet()
		snap, plain := f.s.snapshot(ws), f.s.Snapshot() // plain reads add no watch
		for node, row := range snap.NodesWithAllocs() {
			if want := plain.NodeAllocsShared(node.GetId()); len(row) != len(want) || len(row) > 0 && &row[0] != &want[0] {
				t.Errorf("held %v, node %s: row of %d allocations, want the shared row of %d", held, node.GetId(), len(row), len(want))
			}
		}
		f.place(mock.Alloc(n, job, 2))
		if !fired(ws) {
			t.Errorf("held %v: a placement on a node did not wake the walk's watch", held)
		}
	}
}
