package scheduler

import (
	"net/netip"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestReproReleasedAddressReusedFirst(t *testing.T) {
	c := newCluster(t)
	node := c.addNodes(1, nil)[0]
	j := testJob(10)
	j.TaskGroups[0].Resources = &droverv1.Resources{CpuMhz: 10, MemoryMb: 10}
	job, ev := c.register(j)
	var allocs []*droverv1.Allocation
	for _, ip := range []string{"10.1.2.9", "10.1.2.10", "10.1.2.11"} {
		allocs = append(allocs, runningAlloc(job, node, &droverv1.AllocatedResources{CpuMhz: 10, MemoryMb: 10, Ip: ip}))
	}
	c.place(allocs...)
	c.stop(allocs[1].GetId())
	c.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[1].GetId())
	reused := 0
	for seed := uint64(1); seed <= 32; seed++ {
		cfg := fixedCfg()
		cfg.Seed = seed
		cfg.AllocCIDR = netip.MustParsePrefix("10.1.2.8/29")
		ec := newEvalContext(c.snapshot(), cfg, ev, job)
		placed := placeAll(ec, newStack(ec, job), job, 1)
		if placed[0].GetResources().GetIp() == "10.1.2.10" {
			reused++
		}
	}
	if reused > 0 {
		t.Fatalf("the just-released 10.1.2.10 was handed out in %d of 32 passes while 10.1.2.12-14 were never used", reused)
	}
}
