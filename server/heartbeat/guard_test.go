package heartbeat

import (
	"testing"
	"time"
)

func TestGuardThreshold(t *testing.T) {
	tests := []struct {
		fraction float64
		minNodes int
		fleet    int
		want     int
	}{
		{1.0 / 3, 10, 3, 10},
		{1.0 / 3, 10, 30, 10},
		{1.0 / 3, 10, 31, 11},
		{1.0 / 3, 10, 3000, 1000},
		{1.0 / 3, 5, 30, 10},
		{0.1, 0, 30, 3},
		{1, 0, 7, 7},
		{0.5, 0, 0, 1},
	}
	for _, tt := range tests {
		g := guard{cfg: Config{MassFailureFraction: tt.fraction, MassFailureMinNodes: tt.minNodes}}
		if got := g.threshold(tt.fleet); got != tt.want {
			t.Errorf("threshold(fraction %g, min %d, fleet %d) = %d, want %d",
				tt.fraction, tt.minNodes, tt.fleet, got, tt.want)
		}
	}
}

func TestGuardEngagesWithinWindow(t *testing.T) {
	cfg := Config{MassFailureFraction: 0.5, MassFailureMinNodes: 2, MassFailureWindow: time.Second, ThrottledMarkRate: 1}
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name        string
		expiries    []time.Duration // after t0
		fleet       int
		wantEngaged bool
	}{
		{"too few", []time.Duration{0, 1}, 10, false},
		{"half at once", []time.Duration{0, 1, 2, 3, 4}, 10, true},
		{"spread beyond the window", []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}, 10, false},
		{"min nodes in a small fleet", []time.Duration{0, 1}, 2, true},
		{"one of a small fleet", []time.Duration{0}, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := guard{cfg: cfg}
			engagedEvents := 0
			for _, d := range tt.expiries {
				if g.expired(t0.Add(d), tt.fleet).kind == guardEngaged {
					engagedEvents++
				}
			}
			if g.engaged != tt.wantEngaged {
				t.Fatalf("engaged = %v, want %v", g.engaged, tt.wantEngaged)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.wantEngaged]; engagedEvents != want || g.engagements != uint64(want) {
				t.Fatalf("engaged events %d, engagements %d, want %d", engagedEvents, g.engagements, want)
			}
		})
	}
}

func TestGuardDisengagesOnceWindowDrains(t *testing.T) {
	cfg := Config{MassFailureFraction: 0.5, MassFailureMinNodes: 2, MassFailureWindow: time.Second, ThrottledMarkRate: 1}
	t0 := time.Unix(1000, 0)
	g := guard{cfg: cfg}
	for i := range 4 {
		g.expired(t0.Add(time.Duration(i)*time.Millisecond), 4)
	}
	if !g.engaged {
		t.Fatal("guard did not engage")
	}
	g.markedOne()
	g.cameBackOne()
	g.cameBackOne()

	ev, recheck := g.queueEmptied(t0.Add(500*time.Millisecond), 4)
	if ev.kind != guardQuiet || !g.engaged {
		t.Fatalf("disengaged while the window is full: %+v", ev)
	}
	if recheck != 500*time.Millisecond {
		t.Fatalf("recheck = %s, want 500ms (when the oldest expiry leaves the window)", recheck)
	}

	ev, recheck = g.queueEmptied(t0.Add(1500*time.Millisecond), 4)
	if ev.kind != guardDisengaged || g.engaged || recheck != 0 {
		t.Fatalf("queueEmptied after the window = %+v, %s; engaged %v", ev, recheck, g.engaged)
	}
	if ev.marked != 1 || ev.cameBack != 2 {
		t.Fatalf("disengage event = %+v, want marked 1 came back 2", ev)
	}
}

func TestGuardDisabled(t *testing.T) {
	g := guard{cfg: Config{MassFailureMinNodes: 0}}
	for range 100 {
		if ev := g.expired(time.Unix(1000, 0), 100); ev.kind != guardQuiet {
			t.Fatalf("disabled guard produced %+v", ev)
		}
	}
	if g.engaged || len(g.expiries) != 0 {
		t.Fatalf("disabled guard engaged %v or kept %d expiries", g.engaged, len(g.expiries))
	}
}

// TestGuardThresholdScalesWithTTL checks that the guard counts a share of
// the expiries a silent fleet would produce within the window, which for a
// large fleet is far below a share of the whole fleet.
func TestGuardThresholdScalesWithTTL(t *testing.T) {
	cfg := DefaultConfig() // 10s window, 10s minimum TTL, 50/s, a third, floor 10
	cases := []struct {
		fleet int
		want  int
	}{
		{fleet: 3, want: 10},          // the floor
		{fleet: 300, want: 100},       // base TTL 10s = the window: a third of the fleet
		{fleet: 5000, want: 167},      // base 100s: a third of the 500 expected per window
		{fleet: 50000, want: 167},     // base 1000s: the same rate, so the same count
		{fleet: 1_000_000, want: 167}, // TTLs grow with the fleet; the expiry rate stays 50/s
	}
	for _, tc := range cases {
		g := &guard{cfg: cfg}
		if got := g.threshold(tc.fleet); got != tc.want {
			t.Errorf("threshold(%d) = %d, want %d", tc.fleet, got, tc.want)
		}
	}
}
