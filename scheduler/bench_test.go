package scheduler

import (
	"fmt"
	"net/netip"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
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
