package scheduler

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// TestStaticPortHeldUntilClientTerminal checks that a static port is not
// handed out while an allocation that may still run holds it (desired stop
// is not enough), and is once that allocation is client-complete.
func TestStaticPortHeldUntilClientTerminal(t *testing.T) {
	cases := []struct {
		name       string
		prepare    func(c *cluster, a *droverv1.Allocation)
		wantPlaced bool
	}{
		{"running", func(*cluster, *droverv1.Allocation) {}, false},
		{"desired stop, still running", func(c *cluster, a *droverv1.Allocation) { c.stop(a.GetId()) }, false},
		{"client complete", func(c *cluster, a *droverv1.Allocation) {
			c.stop(a.GetId())
			c.report(a.GetNodeId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, a.GetId())
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			node := c.addNodes(1, nil)[0]
			j := testJob(1)
			j.TaskGroups[0].Resources.Ports = []*droverv1.Port{{Label: "http", Value: 8080}}
			job, ev := c.register(j)
			old := runningAlloc(job, node, &droverv1.AllocatedResources{
				CpuMhz: 100, MemoryMb: 100, Ports: []*droverv1.AllocatedPort{{Label: "http", Value: 8080}},
			})
			c.place(old)
			c.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, old.GetId())
			tc.prepare(c, old)
			ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
			st := newStack(ec, job)
			rn := st.selectNode(job.GetTaskGroups()[0], selectOptions{})
			if got := rn != nil; got != tc.wantPlaced {
				t.Fatalf("placed = %v, want %v", got, tc.wantPlaced)
			}
			if rn == nil {
				f := st.failure(job.GetTaskGroups()[0])
				if f.GetNodesExhausted() != 1 || f.GetExhaustedBy()[fit.DimensionPorts] != 1 {
					t.Fatalf("failure = %v, want 1 node exhausted by ports", f)
				}
				return
			}
			if p := rn.resources.GetPorts(); len(p) != 1 || p[0].GetLabel() != "http" || p[0].GetValue() != 8080 {
				t.Fatalf("ports = %v, want http 8080", p)
			}
		})
	}
}

// TestDynamicPorts checks that dynamic ports come from the node's range,
// skip reserved and held ports, are unique on a node within a plan, and
// that a node whose range is used up is exhausted by ports.
func TestDynamicPorts(t *testing.T) {
	c := newCluster(t)
	c.addNodes(1, func(_ int, n *droverv1.Node) {
		n.Resources.MinDynamicPort, n.Resources.MaxDynamicPort = 30000, 30009
		n.Reserved = &droverv1.NodeReservedResources{Ports: []*droverv1.PortRange{{First: 30000, Last: 30001}}}
	})
	j := testJob(5)
	j.TaskGroups[0].Resources = &droverv1.Resources{CpuMhz: 10, MemoryMb: 10, Ports: []*droverv1.Port{{Label: "a"}, {Label: "b"}}}
	job, ev := c.register(j)
	ec := newEvalContext(c.snapshot(), fixedCfg(), ev, job)
	st := newStack(ec, job)
	// 8 free ports make 4 allocations of 2.
	placed := placeAll(ec, st, job, 5)
	if len(placed) != 4 {
		t.Fatalf("placed %d, want 4", len(placed))
	}
	seen := make(map[int32]bool)
	for _, a := range placed {
		for _, p := range a.GetResources().GetPorts() {
			if p.GetValue() < 30002 || p.GetValue() > 30009 || seen[p.GetValue()] {
				t.Fatalf("port %d reserved, outside the range or given twice (%v)", p.GetValue(), seen)
			}
			seen[p.GetValue()] = true
		}
	}
	if f := st.failure(job.GetTaskGroups()[0]); f.GetExhaustedBy()[fit.DimensionPorts] != 1 {
		t.Fatalf("failure = %v, want exhausted by ports", f)
	}
}

func TestAssignPortsStaticInDynamicRange(t *testing.T) {
	node := &droverv1.Node{Resources: &droverv1.NodeResources{CpuMhz: 1, MemoryMb: 1, MinDynamicPort: 100, MaxDynamicPort: 101}}
	u := fit.NewUsage(node)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		got, ok := assignPorts(u, []*droverv1.Port{{Label: "dyn"}, {Label: "static", Value: 100}}, node, rng, nil)
		if !ok || got[0] != 101 || got[1] != 100 {
			t.Fatalf("ports = %v %v, want the dynamic port to avoid the static one", got, ok)
		}
	}
}

// TestAddresses checks that addresses are unique within a plan, never one
// a live allocation holds, never the network or broadcast address, and
// that a full network exhausts placements by address.
func TestAddresses(t *testing.T) {
	c := newCluster(t)
	node := c.addNodes(1, nil)[0]
	j := testJob(10)
	j.TaskGroups[0].Resources = &droverv1.Resources{CpuMhz: 10, MemoryMb: 10}
	job, ev := c.register(j)
	// 10.1.2.8/29 has 6 usable addresses, .9 to .14; two are held.
	held := runningAlloc(job, node, &droverv1.AllocatedResources{CpuMhz: 10, MemoryMb: 10, Ip: "10.1.2.9"})
	stopping := runningAlloc(job, node, &droverv1.AllocatedResources{CpuMhz: 10, MemoryMb: 10, Ip: "10.1.2.12"})
	freed := runningAlloc(job, node, &droverv1.AllocatedResources{CpuMhz: 10, MemoryMb: 10, Ip: "10.1.2.13"})
	c.place(held, stopping, freed)
	c.stop(stopping.GetId(), freed.GetId())
	c.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED, freed.GetId())
	cfg := fixedCfg()
	cfg.AllocCIDR = netip.MustParsePrefix("10.1.2.8/29")
	ec := newEvalContext(c.snapshot(), cfg, ev, job)
	stk := newStack(ec, job)
	placed := placeAll(ec, stk, job, 10)
	if len(placed) != 4 {
		t.Fatalf("placed %d, want 4 (6 usable addresses, 2 held)", len(placed))
	}
	got := make(map[string]bool)
	for _, a := range placed {
		ip := a.GetResources().GetIp()
		switch {
		case got[ip]:
			t.Fatalf("address %s handed out twice", ip)
		case ip == "10.1.2.8" || ip == "10.1.2.15":
			t.Fatalf("network or broadcast address %s handed out", ip)
		case ip == "10.1.2.9" || ip == "10.1.2.12":
			t.Fatalf("address %s is held by a live allocation", ip)
		case !cfg.AllocCIDR.Contains(netip.MustParseAddr(ip)):
			t.Fatalf("address %s outside %s", ip, cfg.AllocCIDR)
		}
		got[ip] = true
	}
	if !got["10.1.2.13"] {
		t.Fatalf("addresses %v, want the freed 10.1.2.13 among them", got)
	}
	if f := stk.failure(job.GetTaskGroups()[0]); f.GetExhaustedBy()[fit.DimensionIP] != 1 {
		t.Fatalf("failure = %v, want exhausted by address", f)
	}
}

// TestAddressesLargeNetwork draws many addresses from a network shared
// with held ones, across block boundaries.
func TestAddressesLargeNetwork(t *testing.T) {
	c := newCluster(t)
	nodes := c.addNodes(10, func(_ int, n *droverv1.Node) { n.Resources.CpuMhz, n.Resources.MemoryMb = 100000, 100000 })
	j := testJob(1000)
	j.TaskGroups[0].Resources = &droverv1.Resources{CpuMhz: 10, MemoryMb: 10}
	job, ev := c.register(j)
	var existing []*droverv1.Allocation
	for i := range 200 {
		ip := netip.AddrFrom4([4]byte{10, 9, byte(i / 100), byte(i%100 + 1)})
		existing = append(existing, runningAlloc(job, nodes[i%10], &droverv1.AllocatedResources{CpuMhz: 10, MemoryMb: 10, Ip: ip.String()}))
	}
	c.place(existing...)
	cfg := fixedCfg()
	cfg.AllocCIDR = netip.MustParsePrefix("10.9.0.0/22")
	ec := newEvalContext(c.snapshot(), cfg, ev, job)
	placed := placeAll(ec, newStack(ec, job), job, 1000)
	// 1022 usable, 200 held.
	if len(placed) != 822 {
		t.Fatalf("placed %d, want 822", len(placed))
	}
	got := make(map[string]bool)
	for _, a := range existing {
		got[a.GetResources().GetIp()] = true
	}
	for _, a := range placed {
		ip := a.GetResources().GetIp()
		if got[ip] || ip == "10.9.0.0" || ip == "10.9.3.255" {
			t.Fatalf("address %s reused or network/broadcast", ip)
		}
		got[ip] = true
	}
}
