package state

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// nodesAndJobs registers nodes nodes and jobs jobs of count allocations.
func (f *fixture) nodesAndJobs(nodes, jobs int, count int32) ([]*droverv1.Node, []*droverv1.Job) {
	ns := make([]*droverv1.Node, nodes)
	for i := range ns {
		ns[i] = f.node()
	}
	js := make([]*droverv1.Job, jobs)
	for i := range js {
		js[i] = f.job(count)
	}
	return ns, js
}

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
		ns, js := f.nodesAndJobs(nodes, jobs, allocs/jobs)
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
	for _, rollout := range []bool{false, true} {
		b.Run(fmt.Sprintf("deployment=%t", rollout), func(b *testing.B) { benchmarkPlanResult1000(b, rollout) })
	}
}

// benchmarkPlanResult1000 is BenchmarkPlanResult1000; with rollout each
// entry carries a new deployment of its job, which every placement counts
// into, as a service job's plans do.
func benchmarkPlanResult1000(b *testing.B, rollout bool) {
	f := newFixture(b)
	nodes := make([]*droverv1.Node, 100)
	for i := range nodes {
		nodes[i] = f.node()
	}
	encode := func(job *droverv1.Job) []byte {
		e := &droverv1.PlanResultEntry{AppliedAt: 1}
		if rollout {
			e.Deployment = deploymentOf(job, 1000, 0)
		}
		for i := range 1000 {
			a := mock.Alloc(nodes[i%100], job, i)
			a.DeploymentId = e.GetDeployment().GetId()
			e.Allocations = append(e.Allocations, a)
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

// BenchmarkClientUpdates applies agents' reports as the FSM does with
// group-committed UpdateAlloc entries: a store of 100,000 allocations of 100
// jobs on 5,000 nodes, and entries each carrying the reports of nodes
// nodes (20 allocations each, going running), or, as in c1m, where a
// node's allocations come from different plans and start one at a time,
// of 200 nodes reporting one allocation each. The figure to read is the
// time and the bytes allocated per allocation reported.
//
//	go test -run '^$' -bench ClientUpdates -benchtime 200x -count 5 ./fsm/state/
func BenchmarkClientUpdates(b *testing.B) {
	rb := placeForReports(b, 5000, 100, 100_000, func(i int) int { return i % 100 }, false)
	for _, perEntry := range []int{10, 100} {
		b.Run(fmt.Sprintf("nodes-per-entry=%d", perEntry), func(b *testing.B) { rb.report(b, perEntry) })
	}
	// As agents report while their allocations start one by one: each
	// node reports one allocation, and an entry holds the reports of 200
	// nodes, most of them of the same job.
	started := placeForReports(b, 5000, 100, 100_000, func(i int) int { return i / 1000 }, false)
	started.onePerNode = true
	b.Run("nodes-per-entry=200/one-alloc-each", func(b *testing.B) { started.report(b, 200) })
	// The same as AllocClientReport entries, which leave the rows of nodes
	// that reported before alone.
	started.firstReports = true
	b.Run("nodes-per-entry=200/one-alloc-each/first-reports", func(b *testing.B) { started.report(b, 200) })
}

// BenchmarkJobAllocsRead reads the allocations of one job of 1,000 among
// 100,000 (100 jobs on 5,000 nodes) from a new snapshot each time, as the
// API and each evaluation do: "unchanged" reads jobs none of whose
// allocations changed since they were last read, "changed" reads a job
// right after one of its allocations was reported (untimed).
//
//	go test -run '^$' -bench JobAllocsRead -benchmem -count 5 ./fsm/state/
func BenchmarkJobAllocsRead(b *testing.B) {
	const nodes, jobs, allocs = 5000, 100, 100_000
	rb := placeForReports(b, nodes, jobs, allocs, func(i int) int { return i / (allocs / jobs) }, false)
	snap := rb.f.s.Snapshot()
	var jobIDs []string
	byJob := make(map[string][]*droverv1.Allocation)
	for a := range snap.Allocs() {
		if _, ok := byJob[a.GetJobId()]; !ok {
			jobIDs = append(jobIDs, a.GetJobId())
		}
		byJob[a.GetJobId()] = append(byJob[a.GetJobId()], a)
	}
	read := func(b *testing.B, i int) {
		got, _ := rb.f.s.Snapshot().AllocsByJob(jobIDs[i%len(jobIDs)])
		if len(got) != allocs/jobs {
			b.Fatalf("read %d allocations, want %d", len(got), allocs/jobs)
		}
	}
	b.Run("unchanged", func(b *testing.B) {
		i := 0
		for b.Loop() {
			read(b, i)
			i++
		}
	})
	b.Run("changed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			b.StopTimer()
			a := byJob[jobIDs[i%len(jobIDs)]][i/len(jobIDs)%(allocs/jobs)]
			rb.f.report(a.GetNodeId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, a.GetId())
			b.StartTimer()
			read(b, i)
			i++
		}
	})
}

// BenchmarkClientUpdatesAtScale applies agents' reports to a store of a
// million allocations of 1,000 jobs on 5,000 nodes (the full C1M), in
// entries of whole nodes' reports (200 allocations each): two nodes, what
// the committer's bound of ReportAllocsPerEntry makes of them, and 25
// nodes, what the earlier bound of 5,000 allowed. Past the radix tree's
// tracking limit every commit walks the whole allocation tree.
//
//	go test -run '^$' -bench ClientUpdatesAtScale -benchtime 20x -count 3 ./fsm/state/
func BenchmarkClientUpdatesAtScale(b *testing.B) {
	const perNode = 1_000_000 / 5000
	rb := placeForReports(b, 5000, 1000, 1_000_000, func(i int) int { return i / 1000 }, false)
	for _, perEntry := range []int{ReportAllocsPerEntry / perNode, 5000 / perNode} {
		b.Run(fmt.Sprintf("allocs-per-entry=%d", perEntry*perNode), func(b *testing.B) { rb.report(b, perEntry) })
	}
}

// BenchmarkHealthReports is BenchmarkClientUpdates with every job in a
// running deployment and every report carrying health (flipping at each
// pass over the nodes, so that each counts), in entries of ReportAllocsPerEntry
// reports at most, as agents of service jobs send them: each entry counts
// into about a hundred deployments, a few reports each.
//
//	go test -run '^$' -bench HealthReports -benchtime 200x -count 5 ./fsm/state/
func BenchmarkHealthReports(b *testing.B) {
	const nodes, jobs, perNode = 5000, 100, 20
	rb := placeForReports(b, nodes, jobs, nodes*perNode, func(i int) int { return i % jobs }, true)
	rb.health = true
	rb.report(b, ReportAllocsPerEntry/perNode)
}

// reportBench is a store of placed allocations for the report benchmarks.
type reportBench struct {
	f      *fixture
	nodes  []*droverv1.Node
	byNode [][]string // the allocations of each node
	next   int        // the node whose reports go next
	// health makes every report carry health, healthy on even passes over
	// the nodes and unhealthy on odd ones.
	health bool
	// onePerNode makes each node report one of its allocations at a
	// time, the next one at each pass over the nodes.
	onePerNode bool
	// firstReports applies the entries as AllocClientReport entries.
	firstReports bool
}

// placeForReports places allocs allocations, allocation i of job jobOf(i)
// on node i % nodes, in plan results of 1,000; with deployments, each
// job's allocations belong to a running deployment of the job.
func placeForReports(b *testing.B, nodes, jobs, allocs int, jobOf func(i int) int, deployments bool) *reportBench {
	f := newFixture(b)
	ns, js := f.nodesAndJobs(nodes, jobs, int32(allocs/jobs))
	rb := &reportBench{f: f, nodes: ns, byNode: make([][]string, nodes)}
	rollouts := make([]string, jobs)
	if deployments {
		for i, j := range js {
			d := deploymentOf(j, int32(allocs/jobs), 0)
			if _, err := f.s.UpsertPlanResults(f.next(), &droverv1.PlanResultEntry{AppliedAt: 1, Deployment: d}); err != nil {
				b.Fatal(err)
			}
			rollouts[i] = d.GetId()
		}
	}
	for start := 0; start < allocs; start += 1000 {
		e := &droverv1.PlanResultEntry{AppliedAt: 1}
		for i := start; i < start+1000; i++ {
			a := mock.Alloc(ns[i%nodes], js[jobOf(i)], i)
			a.DeploymentId = rollouts[jobOf(i)]
			e.Allocations = append(e.Allocations, a)
			rb.byNode[i%nodes] = append(rb.byNode[i%nodes], a.GetId())
		}
		if _, err := f.s.UpsertPlanResults(f.next(), e); err != nil {
			b.Fatal(err)
		}
	}
	return rb
}

// report applies entries of perEntry nodes' reports (every allocation of
// each node going running) and reports the time per allocation reported.
func (rb *reportBench) report(b *testing.B, perEntry int) {
	reported := 0
	for b.Loop() {
		e := &droverv1.AllocClientUpdateEntry{UpdatedAt: 1}
		for range perEntry {
			n := rb.next % len(rb.nodes)
			group := &droverv1.NodeAllocUpdates{NodeId: rb.nodes[n].GetId()}
			ids := rb.byNode[n]
			if rb.onePerNode {
				k := rb.next / len(rb.nodes) % len(ids)
				ids = ids[k : k+1]
			}
			for _, id := range ids {
				u := &droverv1.AllocClientUpdate{AllocId: id, ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}
				if rb.health {
					u.Healthy = proto.Bool(rb.next/len(rb.nodes)%2 == 0)
				}
				group.Allocs = append(group.Allocs, u)
			}
			reported += len(group.Allocs)
			e.Nodes = append(e.Nodes, group)
			rb.next++
		}
		apply := rb.f.s.UpdateAllocsFromClient
		if rb.firstReports {
			apply = rb.f.s.UpdateAllocsFromClientFirstReports
		}
		if _, _, err := apply(rb.f.next(), e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reported), "ns/alloc-report")
}

// BenchmarkIPReleaseHistory reports the heap the address release history
// holds per address: 65,536 allocations with addresses filling a /16 are
// placed, end (one report per 1,000) and are garbage collected; what the
// store holds then, beyond what it held before, is the order their
// addresses were released in.
//
//	go test -run '^$' -bench IPReleaseHistory -benchtime 1x -count 5 ./fsm/state/
func BenchmarkIPReleaseHistory(b *testing.B) {
	const (
		addrs = 1 << 16
		batch = 1000
	)
	for b.Loop() {
		f := newFixture(b)
		node := f.node()
		job := f.job(addrs)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var allocs []*droverv1.Allocation
		for i := range addrs {
			a := mock.Alloc(node, job, i)
			a.Resources.Ip = fmt.Sprintf("10.99.%d.%d", i>>8, i&0xff)
			a.Resources.Ports = nil
			allocs = append(allocs, a)
		}
		for start := 0; start < addrs; start += batch {
			f.place(allocs[start:min(start+batch, addrs)]...)
		}
		for start := 0; start < addrs; start += batch {
			f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, ids(allocs[start:min(start+batch, addrs)])...)
		}
		stop := &droverv1.PlanResultEntry{AppliedAt: 7}
		for _, a := range allocs {
			stop.Stops = append(stop.Stops, &droverv1.AllocStop{AllocId: a.GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP})
		}
		if _, err := f.s.UpsertPlanResults(f.next(), stop); err != nil {
			b.Fatal(err)
		}
		if _, _, err := f.s.ApplyGC(f.next(), &droverv1.GCEntry{AllocIds: ids(allocs)}); err != nil {
			b.Fatal(err)
		}
		if n := len(slices.Collect(f.s.Snapshot().Allocs())); n != 0 {
			b.Fatalf("%d allocations left after GC", n)
		}
		allocs, stop = nil, nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/addrs, "bytes/address")
		runtime.KeepAlive(f)
	}
}

// BenchmarkNeverUsedIPUsedUp times the search for a never-used address in
// a /10 (the default allocation network, 16,384 blocks) every address of
// which has been used: the answer that there is none, which a scheduling
// pass needs once before it turns to released addresses.
//
//	go test -run '^$' -bench NeverUsedIPUsedUp -count 5 ./fsm/state/
func BenchmarkNeverUsedIPUsedUp(b *testing.B) {
	f := newFixture(b)
	network := netip.MustParsePrefix("100.64.0.0/10")
	tx := newTxn(f.s.db.Load(), 1)
	for a := network.Addr(); network.Contains(a); a = a.Next() {
		key, off := addrBlockKey(a)
		tx.ipRowByKey(key).markFreed(off, 1)
	}
	tx.flushIPs()
	tx.db.Commit()
	snap := f.s.Snapshot()
	first, last := network.Addr().Next(), netip.MustParseAddr("100.127.255.254")
	for b.Loop() {
		if addr, ok := snap.NeverUsedIP(first, last); ok {
			b.Fatalf("found %s in a used-up network", addr)
		}
	}
}
