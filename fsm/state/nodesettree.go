package state

import (
	"github.com/google/btree"
)

// The nodes' allocation sets live in a copy-on-write B-tree, the single row
// of the node_set_tree table, as the allocations by id do (alloctree.go)
// and for the same reason. A node's set holds its allocations' current
// versions, so every raft entry that carries reports rewrites the set of
// each node it names, and every plan the set of each node it places on. In
// a go-memdb table each such write copied a radix-tree path, made a watch
// channel for every node it copied and recorded it in the transaction's
// cache of written nodes, for rows nothing watched: a blocking query on a
// node's allocations watches the set's own channel (allocSet.moved), which
// closes only when the set's index moves. In c1m that insert was 5-7% of
// each server's CPU.
//
// How the tree is stored and written is storedtree.go's.

// nodeSetTreeDegree gives nodes of 15 to 31 sets, as for the allocations.
const nodeSetTreeDegree = 16

// nodeSetTreeKey is the key of the one row of tableNodeSetTree.
const nodeSetTreeKey = "nodes"

// nodeSetItem is one node's set in the tree, ordered by node id.
type nodeSetItem struct {
	key string
	set *allocSet
}

func nodeSetItemLess(a, b nodeSetItem) bool { return a.key < b.key }

// nodeSetTreeStore is where the tree is kept.
var nodeSetTreeStore = storedTree[nodeSetItem]{table: tableNodeSetTree, key: nodeSetTreeKey, empty: func() *btree.BTreeG[nodeSetItem] {
	return btree.NewG(nodeSetTreeDegree, nodeSetItemLess)
}}

// flushNodeSetRows stores the transaction's tree, if it wrote one.
func (tx *txn) flushNodeSetRows() error {
	return tx.nodeSetWrites.flush(tx.db, nodeSetTreeStore)
}

// nodeSetStore keeps node sets in the transaction's tree.
type nodeSetStore struct{}

func (nodeSetStore) load(tx *txn, key string) *allocSet {
	it, _ := tx.nodeSetWrites.current(tx.db, nodeSetTreeStore).Get(nodeSetItem{key: key})
	return it.set
}

func (nodeSetStore) store(tx *txn, row *allocSet) {
	tx.nodeSetWrites.writable(tx.db, nodeSetTreeStore).ReplaceOrInsert(nodeSetItem{key: row.key, set: row})
}

func (nodeSetStore) remove(tx *txn, row *allocSet) {
	tx.nodeSetWrites.writable(tx.db, nodeSetTreeStore).Delete(nodeSetItem{key: row.key})
}

// nodeSet returns a node's stored set, nil if it has none. Blocking
// queries watch it (nodeSetWatched).
func (s *Snapshot) nodeSet(nodeID string) *allocSet {
	it, _ := s.storedNodeSets().Get(nodeSetItem{key: nodeID})
	return it.set
}

// nodeSetWatched returns a node's stored set and, in a blocking query,
// watches the set's moved channel, closed when its index moves, or for a
// node without a set the place of its mark, written when it gets one.
// Outside a blocking query (the schedulers read every node's set in every
// pass) it watches nothing.
func (s *Snapshot) nodeSetWatched(nodeID string) *allocSet {
	set := s.nodeSet(nodeID)
	switch {
	case s.ws == nil:
	case set != nil && set.moved != nil:
		s.ws.Add(set.moved)
	default:
		first[*allocMark](s, tableNodeAllocMarks, indexID, nodeID) // for its watch
	}
	return set
}

// storedNodeSets returns the snapshot's node set tree, loaded on first use
// (atomically, as the allocation tree: see Snapshot).
func (s *Snapshot) storedNodeSets() *btree.BTreeG[nodeSetItem] {
	return nodeSetTreeStore.loadOnce(&s.nodeSets, s.txn)
}
