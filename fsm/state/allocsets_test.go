package state

import (
	"slices"
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestPeekSeesTheTransactionsOwnChanges reads a node's set in the middle of
// a transaction that placed an allocation, changed it and removed another:
// peek must show the newest version of what was added in the same
// transaction and nothing that was removed.
func TestPeekSeesTheTransactionsOwnChanges(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(3)
	stored := f.place(mock.Alloc(n, job, 0))[0]
	_, err := f.s.write(f.next(), func(tx *txn) error {
		added := mock.Alloc(n, job, 1)
		if err := tx.putAlloc(nil, added, true); err != nil {
			return err
		}
		changed := added.CloneVT()
		changed.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
		if err := tx.putAlloc(added, changed, false); err != nil {
			return err
		}
		tx.deleteAlloc(stored)

		got := tx.nodeSets.peek(tx, n.GetId())
		if len(got) != 1 || got[0].GetId() != added.GetId() || got[0].GetClientStatus() != changed.GetClientStatus() {
			t.Errorf("peek = %v; want only %s, running", got, added.GetId())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestJobAllocsFollowReportsAndWakeOnlyForTheirJob: a job's row holds
// only ids, so its allocations are read from the allocation tree, which a
// read of them must not watch as a whole (every write to any allocation
// would wake it). Its own row's watch must still fire for a report of one
// of its allocations, and the read after it must show the report.
func TestJobAllocsFollowReportsAndWakeOnlyForTheirJob(t *testing.T) {
	tests := []struct {
		name  string
		write func(f *fixture, n *droverv1.Node, other *droverv1.Job, mine *droverv1.Allocation)
		wake  bool
	}{
		{"another job's placement", func(f *fixture, n *droverv1.Node, other *droverv1.Job, _ *droverv1.Allocation) {
			f.place(mock.Alloc(n, other, 0))
		}, false},
		{"another job's report", func(f *fixture, n *droverv1.Node, other *droverv1.Job, _ *droverv1.Allocation) {
			a := f.place(mock.Alloc(n, other, 0))[0]
			ws := memdb.NewWatchSet()
			f.s.snapshot(ws).AllocsByJob(other.GetId())
			f.report(n.GetId(), running, a.GetId())
			if !fired(ws) {
				t.Errorf("the other job's own watch did not fire for its report")
			}
		}, false},
		{"a report of the job's allocation", func(f *fixture, n *droverv1.Node, _ *droverv1.Job, mine *droverv1.Allocation) {
			f.report(n.GetId(), running, mine.GetId())
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			job, other := f.job(2), f.job(2)
			placed := f.place(mock.Alloc(n, job, 0), mock.Alloc(n, job, 1))
			ws := memdb.NewWatchSet()
			if allocs, _ := f.s.snapshot(ws).AllocsByJob(job.GetId()); len(allocs) != 2 {
				t.Fatalf("read %d allocations, want 2", len(allocs))
			}
			tt.write(f, n, other, placed[1])
			if got := fired(ws); got != tt.wake {
				t.Errorf("watch fired %v, want %v", got, tt.wake)
			}
			allocs, _ := f.s.Snapshot().AllocsByJob(job.GetId())
			if want := sorted(placed[0].GetId(), placed[1].GetId()); !slices.Equal(ids(allocs), want) {
				t.Fatalf("allocations of the job = %v, want %v", ids(allocs), want)
			}
			for _, a := range allocs {
				want := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
				if tt.wake && a.GetId() == placed[1].GetId() {
					want = running
				}
				if a.GetClientStatus() != want {
					t.Errorf("allocation %s is %s, want %s", a.GetId(), a.GetClientStatus(), want)
				}
			}
		})
	}
}
