package state

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestAllocTreeSnapshotsKeepTheirPointInTime writes an allocation tree
// through committed and failed transactions and checks that every snapshot
// still reads what was stored when it was taken: a write clones the stored
// tree, and a failed write leaves it as it was.
func TestAllocTreeSnapshotsKeepTheirPointInTime(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(300)
	var placed []*droverv1.Allocation
	for i := range 300 {
		placed = append(placed, mock.Alloc(n, job, i))
	}
	// Enough allocations for a tree of several levels.
	f.place(placed...)
	before := f.s.Snapshot()

	f.report(n.GetId(), running, placed[0].GetId(), placed[150].GetId())
	failed := errors.New("planted failure")
	_, err := f.s.write(f.next(), func(tx *txn) error {
		c := tx.alloc(placed[299].GetId()).CloneVT()
		c.ClientStatus = running
		if err := tx.putAlloc(tx.alloc(c.GetId()), c, false); err != nil {
			return err
		}
		tx.deleteAlloc(tx.alloc(placed[1].GetId()))
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("failed write returned %v", err)
	}
	after := f.s.Snapshot()

	for _, tc := range []struct {
		name    string
		snap    *Snapshot
		id      string
		present bool
		status  droverv1.AllocClientStatus
	}{
		{"before, reported", before, placed[0].GetId(), true, pending},
		{"before, reported deep", before, placed[150].GetId(), true, pending},
		{"after, reported", after, placed[0].GetId(), true, running},
		{"after, reported deep", after, placed[150].GetId(), true, running},
		{"after, failed update", after, placed[299].GetId(), true, pending},
		{"after, failed delete", after, placed[1].GetId(), true, pending},
		{"unknown id", after, mock.ID(), false, 0},
		{"not a uuid", after, "not-a-uuid", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.snap.AllocByID(tc.id)
			if (got != nil) != tc.present || got.GetClientStatus() != tc.status {
				t.Errorf("AllocByID = %v (%s), want present %v with %s", got != nil, got.GetClientStatus(), tc.present, tc.status)
			}
		})
	}
	count := func(s *Snapshot) (n int) {
		for range s.Allocs() {
			n++
		}
		return n
	}
	if count(before) != 300 || count(after) != 300 {
		t.Errorf("allocations before %d, after %d, want 300 both", count(before), count(after))
	}
}

// TestAllocTreeChangesCollapse checks the changes a transaction reports
// for allocations it wrote more than once: one change per allocation, from
// its version before the transaction to its last.
func TestAllocTreeChangesCollapse(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(3)
	stored := f.place(mock.Alloc(n, job, 0))[0]
	created, gone := mock.Alloc(n, job, 1), mock.Alloc(n, job, 2)
	var last *droverv1.Allocation
	changes, err := f.s.write(f.next(), func(tx *txn) error {
		for _, a := range []*droverv1.Allocation{created, gone} {
			if err := tx.putAlloc(nil, a, true); err != nil {
				return err
			}
		}
		c := created.CloneVT()
		c.ClientStatus = running
		if err := tx.putAlloc(created, c, false); err != nil {
			return err
		}
		tx.deleteAlloc(gone)
		tx.deleteAlloc(stored)
		last = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []Change
	for _, c := range changes {
		if c.Table == TableAllocs {
			got = append(got, c)
		}
	}
	want := []Change{
		{Table: TableAllocs, Object: last, Created: true},
		{Table: TableAllocs, Object: stored, Deleted: true},
	}
	if len(got) != len(want) {
		t.Fatalf("changes = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if snap := f.s.Snapshot(); snap.TableIndex(TableAllocs) != f.index {
		t.Errorf("allocations' table index %d, want %d", snap.TableIndex(TableAllocs), f.index)
	}
}

// TestBlockingQueryWakesForItsAllocation blocks on one allocation's modify
// index: a write to another allocation may wake it to look again, but only
// the allocation's own change ends it.
func TestBlockingQueryWakesForItsAllocation(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(2)
	placed := f.place(mock.Alloc(n, job, 0), mock.Alloc(n, job, 1))
	watched, other := placed[0], placed[1]
	start := f.s.Snapshot().AllocByID(watched.GetId()).GetModifyIndex()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	passes := make(chan uint64, 100)
	done := make(chan uint64, 1)
	go func() {
		idx, _ := f.s.BlockingQuery(ctx, start, func(snap *Snapshot) (uint64, error) {
			index := snap.AllocByID(watched.GetId()).GetModifyIndex()
			passes <- index
			return index, nil
		})
		done <- idx
	}()
	if got := <-passes; got != start {
		t.Fatalf("first pass index = %d, want %d", got, start)
	}
	f.report(n.GetId(), running, other.GetId())
	f.report(n.GetId(), running, watched.GetId())
	if got := <-done; got != f.index {
		t.Errorf("query returned index %d, want the report's %d", got, f.index)
	}
}
