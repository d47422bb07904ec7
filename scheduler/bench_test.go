package scheduler

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// BenchmarkPlaceService times one scheduling pass of a service job placing
// K allocations on N nodes against a real state store, on the workload of
// issue 4 (so that it compares with the reference figures there): nodes
// alternate between dc-1 and dc-2, node i is in rack r(i mod 25), each has
// 14,000 MHz and 32,000 MB and is ready; the job targets both datacenters,
// is constrained to racks r0..r11 (about half the nodes), asks 3,000 MHz and
// 3,000 MB per allocation, and in the spread case spreads over the rack.
// An iteration is what the generic scheduler does for the placements of
// one evaluation: a new context and stack, then K selections and
// placements, with an address per allocation from a /8.
//
//	go test -run '^$' -bench PlaceService -benchtime 10x -count 3 ./scheduler/
func BenchmarkPlaceService(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for _, allocs := range []int{100, 1000} {
				b.Run(fmt.Sprintf("allocs=%d", allocs), func(b *testing.B) {
					for _, spread := range []bool{false, true} {
						b.Run(fmt.Sprintf("spread=%t", spread), func(b *testing.B) {
							benchmarkPlaceService(b, nodes, allocs, spread)
						})
					}
				})
			}
		})
	}
}

func benchmarkPlaceService(b *testing.B, nodes, allocs int, spread bool) {
	c := newCluster(b)
	c.addNodes(nodes, func(i int, n *droverv1.Node) {
		n.Datacenter = fmt.Sprintf("dc-%d", i%2+1)
		n.Attributes = map[string]string{"rack": fmt.Sprintf("r%d", i%25)}
		n.Resources = &droverv1.NodeResources{CpuMhz: 14000, MemoryMb: 32000}
	})
	job, ev := c.register(benchJob(int32(allocs), spread))
	snap := c.snapshot()
	cfg := Config{AllocCIDR: netip.MustParsePrefix("10.0.0.0/8")}
	for b.Loop() {
		ec := newEvalContext(snap, cfg, ev, job)
		st := newStack(ec, job)
		if placed := placeAll(ec, st, job, allocs); len(placed) != allocs {
			b.Fatalf("placed %d of %d: %v", len(placed), allocs, st.failure(job.GetTaskGroups()[0]))
		}
	}
}

func benchJob(count int32, spread bool) *droverv1.Job {
	j := &droverv1.Job{
		Id:          "bench",
		Type:        droverv1.JobType_JOB_TYPE_SERVICE,
		Datacenters: []string{"dc-1", "dc-2"},
		Constraints: []*droverv1.Constraint{{
			Attribute: "rack",
			Operator:  droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP,
			Value:     "^r([0-9]|1[01])$",
		}},
		TaskGroups: []*droverv1.TaskGroup{{
			Name:      "web",
			Count:     count,
			Resources: &droverv1.Resources{CpuMhz: 3000, MemoryMb: 3000},
			Tasks:     []*droverv1.Task{{Name: "server", Driver: "exec"}},
		}},
	}
	if spread {
		j.TaskGroups[0].Spreads = []*droverv1.Spread{{Attribute: "rack", Weight: 100}}
	}
	j.Canonicalize()
	return j
}

// BenchmarkPlaceServiceReused is BenchmarkPlaceService on 1,000 nodes
// placing 1,000 allocations from a /20 (4,094 addresses) every one of which
// has been used and released, in random order: no address is never-used,
// so every address comes from the release history, the longest released
// first.
//
//	go test -run '^$' -bench PlaceServiceReused -benchtime 10x -count 5 ./scheduler/
func BenchmarkPlaceServiceReused(b *testing.B) {
	const allocs = 1000
	c := newCluster(b)
	nodes := c.addNodes(1000, func(i int, n *droverv1.Node) {
		n.Datacenter = fmt.Sprintf("dc-%d", i%2+1)
		n.Attributes = map[string]string{"rack": fmt.Sprintf("r%d", i%25)}
		n.Resources = &droverv1.NodeResources{CpuMhz: 14000, MemoryMb: 32000}
	})
	job, ev := c.register(benchJob(allocs, false))
	network := netip.MustParsePrefix("10.20.0.0/20")
	var used []*droverv1.Allocation
	for a := network.Addr().Next(); network.Contains(a.Next()); a = a.Next() {
		used = append(used, runningAlloc(job, nodes[len(used)%len(nodes)], &droverv1.AllocatedResources{CpuMhz: 1, MemoryMb: 1, Ip: a.String()}))
	}
	c.place(used...)
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(used), func(i, j int) { used[i], used[j] = used[j], used[i] })
	for start := 0; start < len(used); start += 100 {
		for _, a := range used[start:min(start+100, len(used))] {
			c.report(a.GetNodeId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, a.GetId())
		}
	}
	snap := c.snapshot()
	cfg := Config{AllocCIDR: network}
	for b.Loop() {
		ec := newEvalContext(snap, cfg, ev, job)
		st := newStack(ec, job)
		if placed := placeAll(ec, st, job, allocs); len(placed) != allocs {
			b.Fatalf("placed %d of %d: %v", len(placed), allocs, st.failure(job.GetTaskGroups()[0]))
		}
	}
}

// BenchmarkPlaceLoaded is BenchmarkPlaceService (5,000 nodes, 1,000
// allocations, no spread) on a loaded cluster: every node already holds
// 100 running allocations (a 500,000-allocation state) of 50 MHz, 100 MB
// and one static port each, which leaves room for three more placements
// per node. Building every visited node's usage from its allocations is
// what this measures.
//
//	go test -run '^$' -bench PlaceLoaded -benchtime 10x -count 5 ./scheduler/
func BenchmarkPlaceLoaded(b *testing.B) {
	benchmarkPlaceLoaded(b, nil)
}

// BenchmarkPlaceLoadedCached is BenchmarkPlaceLoaded with a usage cache
// that a pass on the same state has warmed, as on a busy server where
// passes follow each other and most nodes' allocations have not changed
// in between.
//
//	go test -run '^$' -bench PlaceLoadedCached -benchtime 10x -count 5 ./scheduler/
func BenchmarkPlaceLoadedCached(b *testing.B) {
	benchmarkPlaceLoaded(b, NewUsageCache())
}

func benchmarkPlaceLoaded(b *testing.B, cache *UsageCache) {
	const nodes, perNode, allocs = 5000, 100, 1000
	c, job, ev := loadedCluster(b, nodes, perNode, allocs)
	snap := c.snapshot()
	cfg := Config{AllocCIDR: netip.MustParsePrefix("10.0.0.0/8"), UsageCache: cache}
	pass := func() {
		ec := newEvalContext(snap, cfg, ev, job)
		st := newStack(ec, job)
		if placed := placeAll(ec, st, job, allocs); len(placed) != allocs {
			b.Fatalf("placed %d of %d: %v", len(placed), allocs, st.failure(job.GetTaskGroups()[0]))
		}
	}
	if cache != nil {
		pass() // warms the cache, with every node the job may use
		if cache.size() == 0 {
			b.Fatalf("a pass cached no node")
		}
	}
	for b.Loop() {
		pass()
	}
}

// BenchmarkPlaceAfterPlan is BenchmarkPlaceLoadedCached on a state that
// moves on, as a busy server's does: before each pass the plan of the pass
// before it is committed, so the nodes that plan placed on (about a
// thousand, one allocation each) hold one more allocation than the cache
// last counted. The 2,400 nodes in the job's racks have room for three
// placements each, so at most seven passes fit, the first warming the
// cache: run it 5x.
//
//	go test -run '^$' -bench PlaceAfterPlan -benchtime 5x -count 5 ./scheduler/
func BenchmarkPlaceAfterPlan(b *testing.B) { benchPlaceAfter(b, nil) }

// BenchmarkPlaceAfterReports is BenchmarkPlaceAfterPlan with the agents'
// reports in between: each node that took a placement reports it running,
// which rewrites the node's row (its last report's index) as well as the
// allocations', as in a cluster whose agents are alive.
func BenchmarkPlaceAfterReports(b *testing.B) {
	benchPlaceAfter(b, func(c *cluster, placed []*droverv1.Allocation) {
		byNode := make(map[string][]string)
		for _, a := range placed {
			byNode[a.GetNodeId()] = append(byNode[a.GetNodeId()], a.GetId())
		}
		for nodeID, ids := range byNode {
			c.report(nodeID, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, ids...)
		}
	})
}

// benchPlaceAfter times passes of 1,000 placements, each after the plan of
// the pass before it was committed and then, if between is not nil,
// between was called with its placements (untimed).
func benchPlaceAfter(b *testing.B, between func(c *cluster, placed []*droverv1.Allocation)) {
	const nodes, perNode, allocs = 5000, 100, 1000
	c, job, ev := loadedCluster(b, nodes, perNode, allocs)
	cfg := Config{AllocCIDR: netip.MustParsePrefix("10.0.0.0/8"), UsageCache: NewUsageCache()}
	pass := func() []*droverv1.Allocation {
		ec := newEvalContext(c.snapshot(), cfg, ev, job)
		st := newStack(ec, job)
		placed := placeAll(ec, st, job, allocs)
		if len(placed) != allocs {
			b.Fatalf("placed %d of %d: %v", len(placed), allocs, st.failure(job.GetTaskGroups()[0]))
		}
		return placed
	}
	placed := pass() // warms the cache
	for b.Loop() {
		b.StopTimer()
		c.place(placed...)
		if between != nil {
			between(c, placed)
		}
		b.StartTimer()
		placed = pass()
	}
}

// loadedCluster returns the cluster of BenchmarkPlaceLoaded and the job to
// place with its evaluation.
func loadedCluster(b *testing.B, nodes, perNode, allocs int) (*cluster, *droverv1.Job, *droverv1.Evaluation) {
	c := newCluster(b)
	list := c.addNodes(nodes, func(i int, n *droverv1.Node) {
		n.Datacenter = fmt.Sprintf("dc-%d", i%2+1)
		n.Attributes = map[string]string{"rack": fmt.Sprintf("r%d", i%25)}
		n.Resources = &droverv1.NodeResources{CpuMhz: 14000, MemoryMb: 32000}
	})
	// The existing allocations belong to 100 jobs, written 10 nodes'
	// worth per entry so that no entry is huge.
	var fillers []*droverv1.Job
	for j := range 100 {
		filler := benchJob(0, false)
		filler.Id = fmt.Sprintf("filler-%d", j)
		filler, _ = c.register(filler)
		fillers = append(fillers, filler)
	}
	for start := 0; start < len(list); start += 10 {
		var batch []*droverv1.Allocation
		for i, n := range list[start:min(start+10, len(list))] {
			for k := range perNode {
				res := &droverv1.AllocatedResources{CpuMhz: 50, MemoryMb: 100,
					Ports: []*droverv1.AllocatedPort{{Label: "http", Value: int32(20000 + k)}}}
				batch = append(batch, runningAlloc(fillers[(start+i+k)%len(fillers)], n, res))
			}
		}
		c.place(batch...)
	}
	job, ev := c.register(benchJob(int32(allocs), false))
	return c, job, ev
}

// BenchmarkPlaceManyJobs times the passes of the concurrent scenario's
// second step on one server: 5,000 nodes of the simulated agents' default
// shape already holding one job of 10,000 (placed by a pass, so packed as
// the schedulers pack it), then one pass per job of 500 small allocations
// with a dynamic port, each on the state the previous pass's plan was
// committed to, all sharing one usage cache. An iteration is one job's
// pass; 20 fit before the nodes fill.
//
//	go test -run '^$' -bench PlaceManyJobs -benchtime 20x -count 5 ./scheduler/
func BenchmarkPlaceManyJobs(b *testing.B) {
	const nodes, first, each = 5000, 10000, 500
	c := agentShapedCluster(b, nodes)
	cfg := Config{AllocCIDR: netip.MustParsePrefix("10.0.0.0/8"), UsageCache: NewUsageCache()}
	pass := func(id string, count int) {
		job, ev := c.register(smallServiceJob(id, count))
		ec := newEvalContext(c.snapshot(), cfg, ev, job)
		st := newStack(ec, job)
		placed := placeAll(ec, st, job, count)
		if len(placed) != count {
			b.Fatalf("job %s: placed %d of %d: %v", id, len(placed), count, st.failure(job.GetTaskGroups()[0]))
		}
		b.StopTimer()
		c.place(placed...)
		b.StartTimer()
	}
	pass("first", first)
	i := 0
	for b.Loop() {
		pass(fmt.Sprintf("many-%02d", i), each)
		i++
	}
}

// agentShapedCluster is a state of n ready nodes of the simulated agents'
// default shape: 4,000 MHz and 8,192 MB, 100 MHz and 256 MB reserved.
func agentShapedCluster(b *testing.B, n int) *cluster {
	c := newCluster(b)
	c.addNodes(n, func(_ int, node *droverv1.Node) {
		node.Datacenter = "dc1"
		node.Resources = &droverv1.NodeResources{CpuMhz: 4000, MemoryMb: 8192, DiskMb: 100000}
		node.Reserved = &droverv1.NodeReservedResources{CpuMhz: 100, MemoryMb: 256}
	})
	return c
}

// smallServiceJob is the load driver's preset job: one group of count
// allocations of 100 MHz and 128 MB with a dynamic port.
func smallServiceJob(id string, count int) *droverv1.Job {
	j := &droverv1.Job{
		Id:          id,
		Type:        droverv1.JobType_JOB_TYPE_SERVICE,
		Datacenters: []string{"dc1"},
		TaskGroups: []*droverv1.TaskGroup{{
			Name:      "work",
			Count:     int32(count),
			Resources: &droverv1.Resources{CpuMhz: 100, MemoryMb: 128, Ports: []*droverv1.Port{{Label: "http"}}},
			Tasks:     []*droverv1.Task{{Name: "main", Driver: "exec"}},
		}},
	}
	j.Canonicalize()
	return j
}

// BenchmarkPassesFromOneSnapshot measures how concurrent evaluations
// collide (the applier relocates what collides, server/plan/relocate.go):
// five passes of jobs of 1,000 each scheduled from the same snapshot, as
// five workers do when their evaluations arrive together, on 5,000 nodes
// already holding 41,000 allocations placed as c1m places them (a job of
// 10,000, then 30 of 1,000, each pass on the state the one before it
// committed). It reports, besides the time of the five passes, how many
// of each 1,000 placements would not fit on their node once the passes'
// plans are laid one after another over the state (over-capacity/1k), and
// the packing a change to the choice must leave alone: how many nodes the
// job of 10,000 was spread over (nodes/job-of-10k: job anti-affinity
// spreads one job) and how many nodes the 41,000 filled (full-nodes: bin
// packing fills nodes across jobs). Seeds are fixed, so the counts repeat
// from run to run.
//
//	go test -run '^$' -bench PassesFromOneSnapshot -benchtime 20x ./scheduler/
func BenchmarkPassesFromOneSnapshot(b *testing.B) {
	const nodes, concurrent, each = 5000, 5, 1000
	c := agentShapedCluster(b, nodes)
	cache := NewUsageCache()
	seed := uint64(0)
	pass := func(snap State, id string, count int) []*droverv1.Allocation {
		seed++
		cfg := Config{AllocCIDR: netip.MustParsePrefix("10.0.0.0/8"), UsageCache: cache, Seed: seed}
		job, ev := c.register(smallServiceJob(id, count))
		ec := newEvalContext(snap, cfg, ev, job)
		placed := placeAll(ec, newStack(ec, job), job, count)
		if len(placed) != count {
			b.Fatalf("job %s: placed %d of %d", id, len(placed), count)
		}
		return placed
	}
	first := pass(c.snapshot(), "first", 10000)
	spreadOver := make(map[string]bool)
	for _, a := range first {
		spreadOver[a.GetNodeId()] = true
	}
	c.place(first...)
	for i := range 30 {
		c.place(pass(c.snapshot(), fmt.Sprintf("warm-%02d", i), each)...)
	}
	snap := c.snapshot()
	ask := smallServiceJob("ask", 1).GetTaskGroups()[0].GetResources()
	full := 0
	for n, row := range snap.NodesWithAllocs() {
		if _, _, u := fit.AllocsFit(n, row); u.Fits(ask) != "" {
			full++
		}
	}
	var over, planned int
	i := 0
	for b.Loop() {
		var plans [][]*droverv1.Allocation
		for k := range concurrent {
			plans = append(plans, pass(snap, fmt.Sprintf("conc-%03d-%d", i, k), each))
		}
		b.StopTimer()
		over += overCapacity(snap, ask, plans)
		planned += concurrent * each
		b.StartTimer()
		i++
	}
	b.ReportMetric(float64(over)*1000/float64(planned), "over-capacity/1k")
	b.ReportMetric(float64(len(spreadOver)), "nodes/job-of-10k")
	b.ReportMetric(float64(full), "full-nodes")
}

// overCapacity lays plans of allocations asking for ask, one after
// another, over the allocations the snapshot's nodes hold, and counts the
// placements that no longer fit.
func overCapacity(snap State, ask *droverv1.Resources, plans [][]*droverv1.Allocation) int {
	byNode := make(map[string][]*droverv1.Allocation)
	for _, p := range plans {
		for _, a := range p {
			byNode[a.GetNodeId()] = append(byNode[a.GetNodeId()], a)
		}
	}
	over := 0
	for id, placed := range byNode {
		node := snap.NodeByID(id)
		_, _, u := fit.AllocsFit(node, snap.NodeAllocsShared(id))
		for _, a := range placed {
			if u.Fits(ask) != "" {
				over++
				continue
			}
			u.Add(a)
		}
	}
	return over
}
