package fit

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	running  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	complete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
)

// layerNode offers 1,000 MHz, 1,000 MB and 1,000 MB of disk, and reserves
// port 22.
func layerNode() *droverv1.Node {
	return &droverv1.Node{
		Id:        "n1",
		Resources: &droverv1.NodeResources{CpuMhz: 1100, MemoryMb: 1000, DiskMb: 1000},
		Reserved: &droverv1.NodeReservedResources{CpuMhz: 100,
			Ports: []*droverv1.PortRange{{First: 22, Last: 22}}},
	}
}

func alloc(id string, status droverv1.AllocClientStatus, cpu int64, ip string, ports ...int32) *droverv1.Allocation {
	a := &droverv1.Allocation{Id: id, ClientStatus: status,
		Resources: &droverv1.AllocatedResources{CpuMhz: cpu, MemoryMb: 10, DiskMb: 1, Ip: ip}}
	for _, p := range ports {
		a.Resources.Ports = append(a.Resources.Ports, &droverv1.AllocatedPort{Label: "p", Value: p})
	}
	return a
}

// layerBase is what the node's stored allocations hold: b1 and b2 hold,
// b3 is complete and holds nothing (its port and address are free).
func layerBase() []*droverv1.Allocation {
	return []*droverv1.Allocation{
		alloc("b1", running, 100, "10.0.0.1", 20000),
		alloc("b2", running, 200, "", 20001, 20002),
		alloc("b3", complete, 300, "10.0.0.3", 20003),
	}
}

// probePorts and probeIPs are what the layered and flat usages are
// compared on: reserved, base, overlay and free ones.
var (
	probePorts = []int32{22, 20000, 20001, 20002, 20003, 20004, 20005, 20006}
	probeIPs   = []string{"10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.5"}
)

// TestOverlayMatchesFlatUsage checks that an overlay of a frozen base
// answers as one usage built from scratch from the same allocations does
// (sums, ports, addresses, Add's failures, Fits), and that the base is
// left as it was.
func TestOverlayMatchesFlatUsage(t *testing.T) {
	cases := []struct {
		name  string
		added []*droverv1.Allocation
		want  []string // Add's result for each
	}{
		{"nothing", nil, nil},
		{"free port and address", []*droverv1.Allocation{alloc("o1", running, 100, "10.0.0.4", 20004)}, []string{""}},
		{"port of a complete base allocation", []*droverv1.Allocation{alloc("o1", running, 100, "10.0.0.3", 20003)}, []string{""}},
		{"not holding", []*droverv1.Allocation{alloc("o1", complete, 900, "10.0.0.1", 20000)}, []string{""}},
		{"base port", []*droverv1.Allocation{alloc("o1", running, 1, "", 20001)},
			[]string{"ports: port 20001 already held by allocation b2"}},
		{"reserved port", []*droverv1.Allocation{alloc("o1", running, 1, "", 22)},
			[]string{"ports: port 22 is reserved on the node"}},
		{"base address", []*droverv1.Allocation{alloc("o1", running, 1, "10.0.0.1")},
			[]string{"address 10.0.0.1 already held by allocation b1"}},
		{"overlay port then again", []*droverv1.Allocation{
			alloc("o1", running, 1, "10.0.0.5", 20005),
			alloc("o2", running, 1, "", 20005),
			alloc("o3", running, 1, "10.0.0.5"),
		}, []string{"", "ports: port 20005 already held by allocation o1", "address 10.0.0.5 already held by allocation o1"}},
		{"over cpu", []*droverv1.Allocation{alloc("o1", running, 600, "", 20006), alloc("o2", running, 200, "")},
			[]string{"", "cpu"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := layerNode()
			_, _, base := AllocsFit(node, layerBase())
			base.Freeze()
			before := describe(base)

			layered, flat := base.Overlay(), NewUsage(node)
			for _, a := range layerBase() {
				flat.Add(a)
			}
			for i, a := range tc.added {
				got, want := layered.Add(a), flat.Add(a)
				if got != want || got != tc.want[i] {
					t.Errorf("Add(%s) = %q, flat usage %q, want %q", a.GetId(), got, want, tc.want[i])
				}
			}
			if got, want := describe(layered), describe(flat); got != want {
				t.Errorf("overlay:\n%s\nflat usage:\n%s", got, want)
			}
			ask := &droverv1.Resources{CpuMhz: 300, Ports: []*droverv1.Port{{Label: "s", Value: 20004}}}
			if got, want := layered.Fits(ask), flat.Fits(ask); got != want {
				t.Errorf("Fits = %q, flat usage %q", got, want)
			}
			if after := describe(base); after != before {
				t.Errorf("base changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// describe renders what a usage answers on the probes.
func describe(u *Usage) string {
	cpu, mem, disk := u.Capacity()
	s := fmtSums(u.CPU, u.Memory, u.Disk) + " of " + fmtSums(cpu, mem, disk) + "\n"
	for _, p := range probePorts {
		if u.PortUsed(p) {
			s += fmtPort(p) + " "
		}
	}
	for _, ip := range probeIPs {
		if u.IPUsed(ip) {
			s += ip + " "
		}
	}
	return s
}

// TestOverlaysAreIndependent checks that two overlays of one base do not
// see each other's additions.
func TestOverlaysAreIndependent(t *testing.T) {
	_, _, base := AllocsFit(layerNode(), layerBase())
	base.Freeze()
	a, b := base.Overlay(), base.Overlay()
	a.Add(alloc("o1", running, 100, "10.0.0.4", 20004))
	if b.PortUsed(20004) || b.IPUsed("10.0.0.4") || b.CPU != base.CPU {
		t.Fatalf("an overlay sees another's addition: %s", describe(b))
	}
	if !a.PortUsed(20000) || !a.IPUsed("10.0.0.1") || !a.PortUsed(22) || a.CPU != base.CPU+100 {
		t.Fatalf("an overlay misses its base: %s", describe(a))
	}
}

// TestFrozenUsageRefusesChange checks that a frozen usage cannot be added
// to, and that only a frozen one can be overlaid.
func TestFrozenUsageRefusesChange(t *testing.T) {
	mustPanic(t, "Add to a frozen usage", func() { NewUsage(layerNode()).Freeze().Add(alloc("x", running, 1, "")) })
	mustPanic(t, "Overlay of an unfrozen usage", func() { NewUsage(layerNode()).Overlay() })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func fmtSums(cpu, mem, disk int64) string {
	return fmt.Sprintf("cpu %d memory %d disk %d", cpu, mem, disk)
}

func fmtPort(p int32) string { return fmt.Sprintf("port %d", p) }

// TestPortsSurelyFree checks the bound that lets the scheduler skip a
// draw: on a node whose dynamic range is 30000-30003 and which reserves
// port 22, it must never promise ports a draw would not find.
func TestPortsSurelyFree(t *testing.T) {
	node := layerNode()
	node.Resources.MinDynamicPort, node.Resources.MaxDynamicPort = 30000, 30003
	cases := []struct {
		name string
		// stored are the base's allocations' ports, added the ports of
		// the overlay on top.
		stored, added []int32
		n             int
		want          bool
	}{
		{"no port asked", []int32{30000, 30001, 30002, 30003}, nil, 0, true},
		{"empty node", nil, nil, 3, true},                                      // 1 reserved + 3 <= 4
		{"empty node, the whole range", nil, nil, 4, false},                    // the reservation might be in range
		{"base and overlay fill it", []int32{30000}, []int32{30001}, 2, false}, // 3 held + 2 > 4
		{"one left, one asked", []int32{30000}, []int32{30001}, 1, true},
		{"full", []int32{30000, 30001}, []int32{30002, 30003}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := NewUsage(node)
			for i, p := range tc.stored {
				base.Add(alloc(fmt.Sprintf("s%d", i), running, 1, "", p))
			}
			u := base.Freeze().Overlay()
			for i, p := range tc.added {
				u.Add(alloc(fmt.Sprintf("a%d", i), running, 1, "", p))
			}
			if got := u.PortsSurelyFree(tc.n); got != tc.want {
				t.Fatalf("PortsSurelyFree(%d) = %t, want %t", tc.n, got, tc.want)
			}
			if !tc.want {
				return
			}
			// What it promises, draws find.
			var drawn []int32
			for range tc.n {
				p, ok := FreeDynamicPort(node, func(p int32) bool { return u.PortUsed(p) || slices.Contains(drawn, p) },
					func(n int32) int32 { return n - 1 })
				if !ok {
					t.Fatalf("promised %d ports, found %d", tc.n, len(drawn))
				}
				drawn = append(drawn, p)
			}
		})
	}
}

// TestFailedRemembersFirstReason checks that a usage keeps the first reason
// an allocation did not fit, through the overlays laid on it, and that a
// usage everything fit on has none.
func TestFailedRemembersFirstReason(t *testing.T) {
	tests := []struct {
		name        string
		base, ontop []*droverv1.Allocation
		want        string
	}{
		{"all fit", layerBase(), []*droverv1.Allocation{alloc("o1", running, 100, "", 20100)}, ""},
		{"reserved port held below", []*droverv1.Allocation{alloc("b1", running, 100, "", 22)}, nil, "port 22 is reserved on the node"},
		{"port held twice below", []*droverv1.Allocation{alloc("b1", running, 100, "", 20000), alloc("b2", running, 100, "", 20000)}, nil, "port 20000 already held by allocation b1"},
		{"cpu over on top, then a port", layerBase(), []*droverv1.Allocation{alloc("o1", running, 1000, "", 20100), alloc("o2", running, 0, "", 22)}, DimensionCPU},
		{"address held twice on top", layerBase(), []*droverv1.Allocation{alloc("o1", running, 10, "10.0.0.1")}, "address 10.0.0.1 already held by allocation b1"},
		{"complete allocation holds nothing", layerBase(), []*droverv1.Allocation{alloc("o1", complete, 5000, "", 22)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := NewUsage(layerNode())
			for _, a := range tt.base {
				base.Add(a)
			}
			top := base.Freeze().Overlay()
			for _, a := range tt.ontop {
				top.Add(a)
			}
			if got := top.Failed(); !strings.Contains(got, tt.want) || (tt.want == "") != (got == "") {
				t.Errorf("Failed() = %q, want %q", got, tt.want)
			}
		})
	}
}
