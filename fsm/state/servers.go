package state

import (
	"fmt"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// UpsertServer applies a ServerUpsertEntry: the server's record is created,
// or a known server's addresses and version are replaced while its creation
// index is kept. A record equal to the stored one apart from its raft
// indexes is a no-op: nothing is written and the table's index stays.
func (s *StateStore) UpsertServer(index uint64, e *droverv1.ServerUpsertEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error { return tx.upsertServer(e.GetServer()) })
}

func (tx *txn) upsertServer(m *droverv1.ServerMember) error {
	switch {
	case m == nil:
		return invalidEntry("server upsert without a server")
	case m.GetId() == "":
		return invalidEntry("server upsert without an id")
	case m.GetRpcAddr() == "":
		return invalidEntry("server %q without an rpc address", m.GetId())
	case m.GetRaftAddr() == "":
		return invalidEntry("server %q without a raft address", m.GetId())
	}
	m.CreateIndex = tx.index
	if old := tx.server(m.GetId()); old != nil {
		m.CreateIndex = old.GetCreateIndex()
		m.ModifyIndex = old.GetModifyIndex()
		if m.EqualVT(old) {
			return nil
		}
	}
	m.ModifyIndex = tx.index
	return tx.insert(TableServers, m)
}

// RemoveServer applies a ServerRemoveEntry: the server's record is deleted.
// Removing a server that has no record is a no-op, not an error, so that a
// removal may be repeated.
func (s *StateStore) RemoveServer(index uint64, e *droverv1.ServerRemoveEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		id := e.GetServerId()
		if id == "" {
			return invalidEntry("server removal without an id")
		}
		old := tx.server(id)
		if old == nil {
			return nil
		}
		if err := tx.delete(TableServers, old); err != nil {
			return fmt.Errorf("remove server %q: %w", id, err)
		}
		return nil
	})
}
