package state

import (
	"runtime"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// BenchmarkMemoryPerAlloc reports the heap the state store holds per stored
// allocation: the allocation itself, its index entry and its place in the
// node and job sets. 100,000 allocations of 100 jobs on 5,000 nodes, placed
// in plan results of 1,000, as the scheduler would.
func BenchmarkMemoryPerAlloc(b *testing.B) {
	const (
		nodes  = 5000
		jobs   = 100
		allocs = 100_000
		batch  = 1000
	)
	for b.Loop() {
		f := newFixture(b)
		ns := make([]*droverv1.Node, nodes)
		for i := range ns {
			ns[i] = f.node()
		}
		js := make([]*droverv1.Job, jobs)
		for i := range js {
			js[i] = f.job(allocs / jobs)
		}
		// Encode the plan results first, as raft entries would arrive.
		entries := make([][]byte, 0, allocs/batch)
		for start := 0; start < allocs; start += batch {
			e := &droverv1.PlanResultEntry{AppliedAt: 1}
			for i := start; i < start+batch; i++ {
				e.Allocations = append(e.Allocations, mock.Alloc(ns[i%nodes], js[i%jobs], i))
			}
			data, err := e.MarshalVT()
			if err != nil {
				b.Fatal(err)
			}
			entries = append(entries, data)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, data := range entries {
			e := &droverv1.PlanResultEntry{}
			if err := e.UnmarshalVT(data); err != nil {
				b.Fatal(err)
			}
			if _, err := f.s.UpsertPlanResults(f.next(), e); err != nil {
				b.Fatal(err)
			}
		}
		entries = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/allocs, "bytes/alloc")
		runtime.KeepAlive(f)
	}
}

// BenchmarkPlanResult1000 decodes and applies a plan result placing 1,000
// allocations of a new job over 100 nodes, into a store that already holds
// 10,000, as the FSM does with a raft entry. Entries are prepared outside the
// timed part, and a garbage collection runs before each one so that the
// preparation's garbage is not charged to the apply.
func BenchmarkPlanResult1000(b *testing.B) {
	f := newFixture(b)
	nodes := make([]*droverv1.Node, 100)
	for i := range nodes {
		nodes[i] = f.node()
	}
	encode := func(job *droverv1.Job) []byte {
		e := &droverv1.PlanResultEntry{AppliedAt: 1}
		for i := range 1000 {
			e.Allocations = append(e.Allocations, mock.Alloc(nodes[i%100], job, i))
		}
		data, err := e.MarshalVT()
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	apply := func(data []byte) {
		e := &droverv1.PlanResultEntry{}
		if err := e.UnmarshalVT(data); err != nil {
			b.Fatal(err)
		}
		if _, err := f.s.UpsertPlanResults(f.next(), e); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		apply(encode(f.job(1000)))
	}
	for b.Loop() {
		b.StopTimer()
		data := encode(f.job(1000))
		runtime.GC()
		b.StartTimer()
		apply(data)
	}
}
