package state

import (
	"math/rand/v2"
	"testing"

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
	allocs := make([]*droverv1.Allocation, stored)
	for i := range allocs {
		allocs[i] = &droverv1.Allocation{Id: mock.ID(), ClientStatus: pending}
	}
	update := func(a *droverv1.Allocation) *droverv1.Allocation {
		c := a.CloneVT()
		c.ModifyIndex++
		return c
	}
	b.Run("store=radix", func(b *testing.B) {
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
		tree := newAllocTree()
		for _, a := range allocs {
			tree.ReplaceOrInsert(allocItem{id: a.GetId(), alloc: a})
		}
		r := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			w := tree.Clone()
			for range perTxn {
				old, _ := w.Get(allocItem{id: allocs[r.IntN(stored)].GetId()})
				c := update(old.alloc)
				w.ReplaceOrInsert(allocItem{id: c.GetId(), alloc: c})
			}
			tree = w
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perTxn), "ns/alloc-written")
	})
}
