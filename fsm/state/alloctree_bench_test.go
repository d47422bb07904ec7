package state

import (
	"math/rand/v2"
	"testing"

	"github.com/google/btree"
	"github.com/hashicorp/go-memdb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// BenchmarkAllocIndexWrite compares the two ways of keeping allocations by
// id that alloctree.go weighs: a go-memdb table with a uuidIndex (a radix
// tree, changes tracked as the store tracks them) and the copy-on-write
// B-tree. Each holds 100,000 allocations; each transaction looks up and
// replaces 200 of them at random, as an entry of agents' reports does.
// The figures to read are the time and bytes per allocation written.
//
//	go test -run '^$' -bench AllocIndexWrite -benchmem -count 5 ./fsm/state/
func BenchmarkAllocIndexWrite(b *testing.B) {
	const stored, perTxn = 100_000, 200
	allocs := benchAllocs(stored)
	update := func(a *droverv1.Allocation) *droverv1.Allocation {
		c := a.CloneVT()
		c.ModifyIndex++
		return c
	}
	b.Run("store=radix", func(b *testing.B) {
		db := radixAllocs(b, allocs)
		r := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			tx := db.Txn(true)
			tx.TrackChanges()
			for range perTxn {
				old, err := tx.First("allocs", indexID, allocs[r.IntN(stored)].GetId())
				if err != nil {
					b.Fatal(err)
				}
				if err := tx.Insert("allocs", update(old.(*droverv1.Allocation))); err != nil {
					b.Fatal(err)
				}
			}
			tx.Commit()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perTxn), "ns/alloc-written")
	})
	b.Run("store=btree", func(b *testing.B) {
		tree := btreeAllocs(allocs)
		r := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			w := tree.Clone()
			for range perTxn {
				c := update(getAlloc(w, allocs[r.IntN(stored)].GetId()))
				key, _ := allocKeyOf(c.GetId())
				w.ReplaceOrInsert(allocItem{key: key, alloc: c})
			}
			tree = w
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perTxn), "ns/alloc-written")
	})
}

// BenchmarkAllocIndexLookup compares lookups by id in the two stores of
// BenchmarkAllocIndexWrite, of stored ids and of ids that are not stored:
// the plan applier asks of every placement whether it exists already.
//
//	go test -run '^$' -bench AllocIndexLookup -count 5 ./fsm/state/
func BenchmarkAllocIndexLookup(b *testing.B) {
	const stored = 100_000
	allocs := benchAllocs(stored)
	absent := make([]string, 1024)
	for i := range absent {
		absent[i] = mock.ID()
	}
	for _, find := range []string{"stored", "absent"} {
		id := func(i int) string {
			if find == "stored" {
				return allocs[i*7919%stored].GetId()
			}
			return absent[i%len(absent)]
		}
		b.Run("store=radix/find="+find, func(b *testing.B) {
			tx := radixAllocs(b, allocs).Txn(false)
			i := 0
			for b.Loop() {
				if _, err := tx.First("allocs", indexID, id(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run("store=btree/find="+find, func(b *testing.B) {
			tree := btreeAllocs(allocs)
			i := 0
			for b.Loop() {
				getAlloc(tree, id(i))
				i++
			}
		})
	}
}

// benchAllocs returns n allocations with random ids.
func benchAllocs(n int) []*droverv1.Allocation {
	allocs := make([]*droverv1.Allocation, n)
	for i := range allocs {
		allocs[i] = &droverv1.Allocation{Id: mock.ID(), ClientStatus: pending}
	}
	return allocs
}

// radixAllocs stores allocs in a go-memdb table indexed by id as the store
// indexes UUIDs.
func radixAllocs(b *testing.B, allocs []*droverv1.Allocation) *memdb.MemDB {
	db, err := memdb.NewMemDB(&memdb.DBSchema{Tables: map[string]*memdb.TableSchema{"allocs": {
		Name: "allocs",
		Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: uuidIndex[*droverv1.Allocation]{get: (*droverv1.Allocation).GetId}},
		},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	tx := db.Txn(true)
	for _, a := range allocs {
		if err := tx.Insert("allocs", a); err != nil {
			b.Fatal(err)
		}
	}
	tx.Commit()
	return db
}

// btreeAllocs stores allocs in an allocation tree.
func btreeAllocs(allocs []*droverv1.Allocation) *btree.BTreeG[allocItem] {
	tree := newAllocTree()
	for _, a := range allocs {
		key, _ := allocKeyOf(a.GetId())
		tree.ReplaceOrInsert(allocItem{key: key, alloc: a})
	}
	return tree
}
