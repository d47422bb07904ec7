package scheduler

import (
	"slices"
	"testing"
)

func TestAllocNameIndex(t *testing.T) {
	cases := []struct {
		name string
		want int
		ok   bool
	}{
		{"j.web[0]", 0, true},
		{"j.web[12]", 12, true},
		{"a.b[c].web[3]", 3, true},
		{"j.web", 0, false},
		{"j.web[]", 0, false},
		{"j.web[x]", 0, false},
		{"j.web[-1]", 0, false},
		{"j.web3]", 0, false},
	}
	for _, tc := range cases {
		got, ok := allocNameIndex(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("allocNameIndex(%q) = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAllocNamesNext(t *testing.T) {
	cases := []struct {
		name  string
		taken []string
		k     int
		want  []string
	}{
		{"empty", nil, 3, []string{"j.g[0]", "j.g[1]", "j.g[2]"}},
		{"fills gaps first", []string{"j.g[0]", "j.g[2]", "j.g[5]"}, 3, []string{"j.g[1]", "j.g[3]", "j.g[4]"}},
		{"names without an index hold nothing", []string{"j.g", "j.g[1]"}, 2, []string{"j.g[0]", "j.g[2]"}},
		{"none", []string{"j.g[0]"}, 0, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newAllocNames("j", "g")
			for _, name := range tc.taken {
				n.take(name)
			}
			if got := n.next(tc.k); !slices.Equal(got, tc.want) {
				t.Errorf("next(%d) = %q, want %q", tc.k, got, tc.want)
			}
		})
	}
	n := newAllocNames("j", "g")
	first := n.next(2)
	if second := n.next(1); !slices.Equal(second, []string{"j.g[2]"}) {
		t.Errorf("next after %q = %q, want j.g[2]", first, second)
	}
}
