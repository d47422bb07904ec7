package state

import (
	"sync/atomic"

	"github.com/google/btree"
	memdb "github.com/hashicorp/go-memdb"
)

// A storedTree is a copy-on-write B-tree kept as the one row of a go-memdb
// table: the allocations by id (alloctree.go) and the nodes' allocation
// sets (nodesettree.go). A transaction's first write clones the stored
// tree (constant time) and finish stores the clone as the new row, so a
// reader never sees a tree still being written, and a write costs the
// tree nodes it copies rather than a radix path, a watch channel and a
// cache entry per row.
type storedTree[T any] struct {
	table, key string
	empty      func() *btree.BTreeG[T]
}

// treeRow is the one row of a stored tree's table.
type treeRow[T any] struct {
	tree *btree.BTreeG[T]
}

// indexer is the id index of the tree's table, which holds only key.
func (st storedTree[T]) indexer() memdb.Indexer {
	return stringIndex[*treeRow[T]]{get: func(*treeRow[T]) string { return st.key }}
}

// load reads the stored tree, or an empty one when there is none yet.
func (st storedTree[T]) load(db *memdb.Txn) *btree.BTreeG[T] {
	row, err := db.First(st.table, indexID, st.key)
	mustRead(err, st.table, indexID)
	if r, ok := row.(*treeRow[T]); ok && r != nil {
		return r.tree
	}
	return st.empty()
}

// loadOnce returns the tree held in p, loading it from db on first use.
// Snapshots keep their trees this way: the store is atomic because
// goroutines sharing a snapshot may load it at once (see Snapshot).
func (st storedTree[T]) loadOnce(p *atomic.Pointer[btree.BTreeG[T]], db *memdb.Txn) *btree.BTreeG[T] {
	if t := p.Load(); t != nil {
		return t
	}
	t := st.load(db)
	p.Store(t)
	return t
}

// treeWrites is a transaction's view of a stored tree: the stored tree,
// loaded on first use, and the transaction's clone, made on its first
// write.
type treeWrites[T any] struct {
	read, write *btree.BTreeG[T]
}

// current returns the tree as the transaction leaves it so far.
func (w *treeWrites[T]) current(db *memdb.Txn, st storedTree[T]) *btree.BTreeG[T] {
	if w.write != nil {
		return w.write
	}
	if w.read == nil {
		w.read = st.load(db)
	}
	return w.read
}

// writable returns the transaction's own clone of the tree.
func (w *treeWrites[T]) writable(db *memdb.Txn, st storedTree[T]) *btree.BTreeG[T] {
	if w.write == nil {
		w.write = w.current(db, st).Clone()
	}
	return w.write
}

// flush stores the transaction's clone, if it wrote one.
func (w *treeWrites[T]) flush(db *memdb.Txn, st storedTree[T]) error {
	if w.write == nil {
		return nil
	}
	return db.Insert(st.table, &treeRow[T]{tree: w.write})
}
