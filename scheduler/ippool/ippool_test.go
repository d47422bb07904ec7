package ippool

import (
	"cmp"
	"net/netip"
	"slices"
	"testing"
)

// fakeSource is a state in which some addresses are held and others were
// released at given raft indexes.
type fakeSource struct {
	held     map[netip.Addr]bool
	released map[netip.Addr]uint64
}

func newSource(held []string, released map[string]uint64) *fakeSource {
	s := &fakeSource{held: map[netip.Addr]bool{}, released: map[netip.Addr]uint64{}}
	for _, h := range held {
		s.held[netip.MustParseAddr(h)] = true
	}
	for a, at := range released {
		s.released[netip.MustParseAddr(a)] = at
	}
	return s
}

func (s *fakeSource) NeverUsedIP(from, last netip.Addr) (netip.Addr, bool) {
	for a := from; a.Compare(last) <= 0; a = a.Next() {
		if !s.held[a] && s.released[a] == 0 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (s *fakeSource) ReleasedIPs() func() (netip.Addr, uint64, bool) {
	var order []netip.Addr
	for a := range s.released {
		order = append(order, a)
	}
	slices.SortFunc(order, func(x, y netip.Addr) int {
		return cmp.Or(cmp.Compare(s.released[x], s.released[y]), x.Compare(y))
	})
	return func() (netip.Addr, uint64, bool) {
		if len(order) == 0 {
			return netip.Addr{}, 0, false
		}
		a := order[0]
		order = order[1:]
		return a, s.released[a], true
	}
}

// startAt draws the given offset, whatever the span.
func startAt(off uint64) func(uint64) uint64 { return func(uint64) uint64 { return off } }

func TestPick(t *testing.T) {
	cases := []struct {
		name     string
		prefix   string
		held     []string
		released map[string]uint64
		taken    []string
		start    uint64
		want     []string // in order; then no more, unless total says
		total    int
	}{
		{
			name:   "never used from the start, wrapping",
			prefix: "10.1.2.8/29", start: 3, // 10.1.2.12
			want: []string{"10.1.2.12", "10.1.2.13", "10.1.2.14", "10.1.2.9", "10.1.2.10", "10.1.2.11"},
		},
		{
			name:   "never used before released, released by age",
			prefix: "10.1.2.8/29", start: 0,
			held:     []string{"10.1.2.9"},
			released: map[string]uint64{"10.1.2.10": 7, "10.1.2.11": 5, "10.1.2.13": 9},
			want:     []string{"10.1.2.12", "10.1.2.14", "10.1.2.11", "10.1.2.10", "10.1.2.13"},
		},
		{
			name:   "released in one entry: address order",
			prefix: "10.1.2.8/29", start: 0,
			held:     []string{"10.1.2.9", "10.1.2.10", "10.1.2.11"},
			released: map[string]uint64{"10.1.2.14": 4, "10.1.2.12": 4, "10.1.2.13": 4},
			want:     []string{"10.1.2.12", "10.1.2.13", "10.1.2.14"},
		},
		{
			name:   "taken ones skipped in both tiers",
			prefix: "10.1.2.8/29", start: 0,
			released: map[string]uint64{"10.1.2.9": 3, "10.1.2.10": 2},
			taken:    []string{"10.1.2.11", "10.1.2.10"},
			want:     []string{"10.1.2.12", "10.1.2.13", "10.1.2.14", "10.1.2.9"},
		},
		{
			name:   "released outside the network or network and broadcast skipped",
			prefix: "10.1.2.8/29", start: 0,
			held:     []string{"10.1.2.9", "10.1.2.10", "10.1.2.11", "10.1.2.12", "10.1.2.13"},
			released: map[string]uint64{"10.1.3.1": 1, "10.1.2.8": 2, "10.1.2.15": 3, "10.1.2.14": 4},
			want:     []string{"10.1.2.14"},
		},
		{
			name:   "never used across blocks",
			prefix: "10.9.0.0/23", start: 254, // 10.9.0.255
			held:  []string{"10.9.1.0", "10.9.1.1"},
			want:  []string{"10.9.0.255", "10.9.1.2", "10.9.1.3"},
			total: 510 - 2,
		},
		{
			name:   "IPv6",
			prefix: "fd00::/125", start: 0,
			released: map[string]uint64{"fd00::3": 2},
			held:     []string{"fd00::1", "fd00::4", "fd00::5", "fd00::6", "fd00::7"},
			want:     []string{"fd00::2", "fd00::3"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			taken := map[netip.Addr]bool{}
			for _, a := range tc.taken {
				taken[netip.MustParseAddr(a)] = true
			}
			src := newSource(tc.held, tc.released)
			p := New(netip.MustParsePrefix(tc.prefix), src, func(a netip.Addr) bool { return taken[a] }, startAt(tc.start))
			var got []string
			for range 1000 {
				a, ok := p.Pick()
				if !ok {
					break
				}
				got = append(got, a.String())
				// A pass counts what it picked as taken.
				taken[a] = true
			}
			total := cmp.Or(tc.total, len(tc.want))
			if len(got) != total || !slices.Equal(got[:len(tc.want)], tc.want) {
				t.Fatalf("picked %d: %v..., want %d starting %v", len(got), got[:min(len(got), 10)], total, tc.want)
			}
		})
	}
}

// TestPickNeverTwice checks that without a taken function a picker still
// never hands out one address twice, in either tier.
func TestPickNeverTwice(t *testing.T) {
	src := newSource([]string{"10.0.0.1"}, map[string]uint64{"10.0.0.2": 1, "10.0.0.3": 2})
	p := New(netip.MustParsePrefix("10.0.0.0/29"), src, nil, startAt(0))
	seen := map[netip.Addr]bool{}
	for {
		a, ok := p.Pick()
		if !ok {
			break
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	if len(seen) != 5 {
		t.Fatalf("handed out %d addresses, want 5 (6 usable, 1 held)", len(seen))
	}
}

func TestDisabled(t *testing.T) {
	p := New(netip.Prefix{}, newSource(nil, nil), nil, startAt(0))
	if p.Enabled() {
		t.Fatal("a picker without a network is enabled")
	}
	if _, ok := p.Pick(); ok {
		t.Fatal("a picker without a network handed out an address")
	}
	if _, ok := New(netip.MustParsePrefix("10.0.0.0/31"), newSource(nil, nil), nil, startAt(0)).Pick(); ok {
		t.Fatal("a /31 has no usable address, yet one was handed out")
	}
}

func TestUsableOffsets(t *testing.T) {
	cases := []struct {
		prefix string
		lo, hi uint64
		ok     bool
	}{
		{"10.0.0.0/24", 1, 254, true},
		{"10.0.0.0/30", 1, 2, true},
		{"10.0.0.0/31", 0, 0, false},
		{"10.0.0.0/32", 0, 0, false},
		{"fd00::/120", 1, 255, true},
		{"fd00::/32", 1, 1<<63 - 1, true},
	}
	for _, tc := range cases {
		lo, hi, ok := UsableOffsets(netip.MustParsePrefix(tc.prefix))
		if ok != tc.ok || (ok && (lo != tc.lo || hi != tc.hi)) {
			t.Fatalf("%s: offsets %d..%d %v, want %d..%d %v", tc.prefix, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
}
