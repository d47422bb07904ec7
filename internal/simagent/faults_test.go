package simagent

import (
	"testing"
	"time"
)

func TestFaultsPickFlakyNodesEvenly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fraction float64
		n        int
		want     []int
	}{
		{name: "none", fraction: 0, n: 10},
		{name: "a tenth", fraction: 0.1, n: 20, want: []int{9, 19}},
		{name: "half", fraction: 0.5, n: 6, want: []int{1, 3, 5}},
		{name: "all", fraction: 1, n: 3, want: []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Faults{Fraction: tc.fraction, Every: time.Second, Offline: time.Millisecond}
			var got []int
			for i := range tc.n {
				rank, ok := f.Flaky(i)
				if !ok {
					continue
				}
				if rank != len(got) {
					t.Errorf("node %d has rank %d, want %d", i, rank, len(got))
				}
				got = append(got, i)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("flaky nodes %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("flaky nodes %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestFaultsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Faults
		ok   bool
	}{
		{name: "off", f: Faults{}, ok: true},
		{name: "good", f: Faults{Fraction: 0.1, Every: time.Minute, Offline: time.Second}, ok: true},
		{name: "fraction above one", f: Faults{Fraction: 1.5, Every: time.Minute, Offline: time.Second}},
		{name: "offline as long as the period", f: Faults{Fraction: 0.1, Every: time.Second, Offline: time.Second}},
		{name: "no period", f: Faults{Fraction: 0.1, Offline: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f.validate(); (err == nil) != tc.ok {
				t.Errorf("validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
}
