package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// BenchmarkConcurrentPlans has four schedulers each place a job of 100
// allocations at the same time, on one state and one allocation network,
// their plans going through the applier (commits are applied to the store
// at once; no raft). It reports how many node plans the applier dropped
// (each costs its scheduler a refresh and a new plan), how many addresses
// it replaced, and how many plans it applied (4 when none was retried).
// "fresh" draws from a /16 never used; "reused" from a /22 whose 1,022
// addresses have all been used and released in random order.
//
//	go test -run '^$' -bench ConcurrentPlans -benchtime 20x -count 5 ./server/plan/
func BenchmarkConcurrentPlans(b *testing.B) {
	for _, tc := range []struct {
		name    string
		network string
		reused  bool
	}{{"fresh", "10.30.0.0/16", false}, {"reused", "10.30.0.0/22", true}} {
		b.Run(tc.name, func(b *testing.B) {
			pool := netip.MustParsePrefix(tc.network)
			var rejected, replaced, applied uint64
			for b.Loop() {
				b.StopTimer()
				h, evals := concurrentPlansSetup(b, pool, tc.reused)
				b.StartTimer()
				runSchedulers(b, h, pool, evals)
				b.StopTimer()
				st := h.applier.Stats()
				rejected += st.NodesRejected
				replaced += st.AddressesReplaced
				applied += st.Applied
				h.stop()
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(rejected)/n, "rejected-nodes/op")
			b.ReportMetric(float64(replaced)/n, "replaced/op")
			b.ReportMetric(float64(applied)/n, "plans/op")
		})
	}
}

// concurrentPlansSetup makes a store with 20 large ready nodes, the pool's
// release history if reused, and four jobs of 100 with pending
// evaluations, and an applier over it.
func concurrentPlansSetup(b *testing.B, pool netip.Prefix, reused bool) (*harness, []*droverv1.Evaluation) {
	f := newFixture(b)
	h := newHarness(b, f, &fakeRaft{}, func(c *Config) { c.AllocCIDR = pool })
	var nodes []*droverv1.Node
	for range 20 {
		nodes = append(nodes, f.node(ready, func(n *droverv1.Node) {
			n.Resources = &droverv1.NodeResources{CpuMhz: 1_000_000, MemoryMb: 1_000_000, DiskMb: 1_000_000}
		}))
	}
	if reused {
		filler, _ := f.job()
		var ips []string
		for a := pool.Addr().Next(); pool.Contains(a.Next()); a = a.Next() {
			ips = append(ips, a.String())
		}
		allocs := f.fill(nodes[0], filler, ips...)
		rand.Shuffle(len(allocs), func(i, j int) { allocs[i], allocs[j] = allocs[j], allocs[i] })
		for i := 0; i < len(allocs); i += 50 {
			ids := make([]string, 0, 50)
			for _, a := range allocs[i:min(i+50, len(allocs))] {
				ids = append(ids, a.GetId())
			}
			f.report(nodes[0].GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, ids...)
		}
	}
	var evals []*droverv1.Evaluation
	for range 4 {
		evals = append(evals, f.register(smallJob(100)))
	}
	return h, evals
}

// runSchedulers runs one scheduler per evaluation at once on the newest
// state; each submits its plan once all have built theirs.
func runSchedulers(b *testing.B, h *harness, pool netip.Prefix, evals []*droverv1.Evaluation) {
	snap := h.st.Snapshot()
	var start, done sync.WaitGroup
	start.Add(len(evals))
	errs := make([]error, len(evals))
	for i, ev := range evals {
		s, err := scheduler.New(ev.GetType(), snap, &schedPlanner{h: h, start: &start}, scheduler.Config{AllocCIDR: pool})
		if err != nil {
			b.Fatal(err)
		}
		done.Add(1)
		go func() {
			defer done.Done()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			errs[i] = s.Process(ctx, ev)
		}()
	}
	done.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyRelocating checks a plan of 1,000 placements whose nodes
// were all filled meanwhile, as concurrent plans find them in the full
// C1M: 500 full nodes and 500 with room for two more, each of the 1,000
// nodes holding 200 allocations with a port each. Every placement goes to
// its first alternate. With the server's usage cache, a candidate's room
// starts from the cached usage of its stored allocations.
//
//	go test -run '^$' -bench VerifyRelocating -benchtime 20x -count 5 ./server/plan/
func BenchmarkVerifyRelocating(b *testing.B) {
	const (
		nodes   = 1000
		perNode = 200
		small   = 10 // MHz of each allocation held
	)
	f := newFixture(b)
	j, ev := f.job()
	ns := make([]*droverv1.Node, nodes)
	for i := range ns {
		ns[i] = f.node(droverv1.NodeStatus_NODE_STATUS_READY)
	}
	held := func(n *droverv1.Node, slot int, cpu int64) *droverv1.Allocation {
		a := f.alloc(n, j, cpu, 1)
		a.Resources.Ip = ""
		a.Resources.Ports[0].Value = int32(20000 + slot)
		return a
	}
	for i, n := range ns {
		var batch []*droverv1.Allocation
		for slot := range perNode - 1 {
			batch = append(batch, held(n, slot, small))
		}
		// The last one fills the first half; the second half keeps room
		// for two placements of 100 MHz.
		last := int64(nodeCPU - small*(perNode-1))
		if i >= nodes/2 {
			last -= 200
		}
		batch = append(batch, held(n, perNode, last))
		f.place(batch...)
	}
	var planned []*droverv1.Allocation
	var nps []*droverv1.NodePlan
	for i := range nodes / 2 {
		var mine []*droverv1.Allocation
		for k := range 2 {
			a := held(ns[i], 30000+k, 100)
			mine = append(mine, a)
			planned = append(planned, a)
		}
		nps = append(nps, nodePlan(ns[i], mine))
	}
	p := newPlan(ev, nps...)
	for i, a := range planned {
		var alts []*droverv1.Node
		for k := range 8 {
			alts = append(alts, ns[nodes/2+(i/2+k)%(nodes/2)])
		}
		withAlternates(p, a, alts...)
	}
	benchVerify(b, f.st.Snapshot(), p, func(ver verification) string {
		if ver.relocated != len(planned) {
			return fmt.Sprintf("%d of %d placements relocated", ver.relocated, len(planned))
		}
		return ""
	})
}

// benchVerify runs verifyPlan on p in two sub-benchmarks: without the
// server's usage cache, and with one warm, as the schedulers that planned
// on these nodes leave it. check returns what is wrong with a
// verification, or "".
func benchVerify(b *testing.B, snap *state.Snapshot, p *droverv1.Plan, check func(verification) string) {
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("usage-cache=%v", cached), func(b *testing.B) {
			var usage *scheduler.UsageCache
			if cached {
				usage = scheduler.NewUsageCache()
				verifyPlan(snap, p, nil, netip.Prefix{}, usage)
			}
			b.ReportAllocs()
			for b.Loop() {
				if msg := check(verifyPlan(snap, p, nil, netip.Prefix{}, usage)); msg != "" {
					b.Fatal(msg)
				}
			}
		})
	}
}

// BenchmarkVerifyPlan checks the plan c1m submits most: one placement on
// each of 1,000 nodes that hold 20 allocations with a port each and have
// room for it. Without the server's usage cache every node's allocations
// are counted again; with it (warm, as the schedulers that planned on
// these nodes leave it) a node's count starts from the cached one.
//
//	go test -run '^$' -bench 'VerifyPlan$' -count 5 ./server/plan/
func BenchmarkVerifyPlan(b *testing.B) {
	const (
		nodes   = 1000
		perNode = 20
	)
	f := newFixture(b)
	j, ev := f.job()
	nps := make([]*droverv1.NodePlan, nodes)
	for i := range nps {
		n := f.node(droverv1.NodeStatus_NODE_STATUS_READY)
		batch := make([]*droverv1.Allocation, perNode)
		for k := range batch {
			batch[k] = f.alloc(n, j, 100, 100)
		}
		f.place(batch...)
		nps[i] = nodePlan(n, []*droverv1.Allocation{f.alloc(n, j, 100, 100)})
	}
	benchVerify(b, f.st.Snapshot(), newPlan(ev, nps...), func(ver verification) string {
		if len(ver.accepted) != nodes {
			return fmt.Sprintf("%d of %d node plans accepted: %+v", len(ver.accepted), nodes, ver.rejected)
		}
		return ""
	})
}
