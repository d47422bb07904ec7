package cluster

import "testing"

func TestSlotOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		slot int
		ok   bool
	}{
		{"drvt7b", 7, true},
		{"drvt7s1", 7, true},
		{"drvt255s12", 255, true},
		{"drvt0s3", 0, true},
		{"drvt256b", 0, false}, // no such slot
		{"drvt07b", 0, false},  // not a name the harness makes
		{"drvt7", 0, false},
		{"drvt7s", 0, false},
		{"drvt7x1", 0, false},
		{"xdrvt7b", 0, false},
		{"eth0", 0, false},
	} {
		slot, ok := slotOf(tc.name)
		if slot != tc.slot || ok != tc.ok {
			t.Errorf("slotOf(%q) = %d, %v, want %d, %v", tc.name, slot, ok, tc.slot, tc.ok)
		}
	}
}

func TestGuardSlot(t *testing.T) {
	for _, tc := range []struct {
		route ipRoute
		slot  int
		ok    bool
	}{
		{ipRoute{Type: "unreachable", Dst: "10.213.9.0/24", Metric: guardMetric}, 9, true},
		{ipRoute{Type: "unreachable", Dst: "10.213.9.0/24", Metric: 1}, 0, false},
		{ipRoute{Type: "blackhole", Dst: "10.213.9.0/24", Metric: guardMetric}, 0, false},
		{ipRoute{Type: "unreachable", Dst: "10.214.9.0/24", Metric: guardMetric}, 0, false},
		{ipRoute{Type: "unreachable", Dst: "10.213.9.0/25", Metric: guardMetric}, 0, false},
		{ipRoute{Type: "unreachable", Dst: "default", Metric: guardMetric}, 0, false},
	} {
		slot, ok := guardSlot(tc.route)
		if slot != tc.slot || ok != tc.ok {
			t.Errorf("guardSlot(%+v) = %d, %v, want %d, %v", tc.route, slot, ok, tc.slot, tc.ok)
		}
	}
}

func TestClash(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route ipRoute
		clash bool
	}{
		{"default route", ipRoute{Dst: "default", Dev: "eth0"}, false},
		{"another network", ipRoute{Dst: "192.0.2.0/24", Dev: "eth0"}, false},
		{"the slot's bridge", ipRoute{Dst: "10.213.5.0/24", Dev: "drvt5b"}, false},
		{"the slot's own address", ipRoute{Type: "local", Dst: "10.213.5.1", Dev: "drvt5b"}, false},
		{"the slot's guard", ipRoute{Type: "unreachable", Dst: "10.213.5.0/24", Metric: guardMetric}, false},
		{"another slot's bridge", ipRoute{Dst: "10.213.6.0/24", Dev: "drvt6b"}, false},
		{"a wider network over it", ipRoute{Dst: "10.0.0.0/8", Dev: "docker0"}, true},
		{"an address in it", ipRoute{Type: "local", Dst: "10.213.5.77", Dev: "eth1"}, true},
		{"the same /24 elsewhere", ipRoute{Dst: "10.213.5.0/24", Dev: "br-lab"}, true},
		{"a narrower route in it", ipRoute{Dst: "10.213.5.128/25", Dev: "tun0"}, true},
	} {
		inv := netInventory{routes: []ipRoute{tc.route}}
		if got := inv.clash(5); got != tc.clash {
			t.Errorf("%s: clash with %+v = %v, want %v", tc.name, tc.route, got, tc.clash)
		}
	}
}
