package state

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// clusterMetaRow is the key of the cluster metadata table's only row.
const clusterMetaRow = "cluster"

func clusterMetaKey(*droverv1.ClusterMetadata) string { return clusterMetaRow }

// SetClusterMetadata applies a ClusterMetadataEntry. The first metadata
// written stays: when the state already holds some, nothing is written and
// the stored metadata is returned, so that two leaders racing to write it
// end up with one cluster id. Otherwise the entry's metadata is stored with
// index as its create index and returned.
func (s *StateStore) SetClusterMetadata(index uint64, e *droverv1.ClusterMetadataEntry) (*droverv1.ClusterMetadata, []Change, error) {
	var stored *droverv1.ClusterMetadata
	changes, err := s.write(index, func(tx *txn) error {
		m := e.GetMetadata()
		switch {
		case m == nil:
			return invalidEntry("cluster metadata entry without metadata")
		case m.GetClusterId() == "":
			return invalidEntry("cluster metadata without a cluster id")
		}
		if old := get[*droverv1.ClusterMetadata](tx, TableClusterMeta, clusterMetaRow); old != nil {
			stored = old
			return nil
		}
		m.CreateIndex = tx.index
		stored = m
		return tx.insert(TableClusterMeta, m)
	})
	if err != nil {
		return nil, nil, err
	}
	return stored, changes, nil
}

// ClusterMetadata returns the cluster's metadata, or nil while none has
// been written.
func (s *Snapshot) ClusterMetadata() *droverv1.ClusterMetadata {
	return first[*droverv1.ClusterMetadata](s, TableClusterMeta, indexID, clusterMetaRow)
}

// ClusterMetadata restores the cluster's metadata.
func (r *Restorer) ClusterMetadata(m *droverv1.ClusterMetadata) error {
	return r.tx.insert(TableClusterMeta, m)
}
