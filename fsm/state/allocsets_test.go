package state

import (
	"testing"

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
