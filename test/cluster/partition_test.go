package cluster

import (
	"cmp"
	"maps"
	"slices"
	"testing"
)

func TestPartitionCuts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		groups [][]string
		want   []link
	}{
		{"isolate one of three", [][]string{{"s1"}, {"s2", "s3"}},
			[]link{{"s1", "s2"}, {"s1", "s3"}, {"s2", "s1"}, {"s3", "s1"}}},
		{"two of five unnamed, a bridge", [][]string{{"s1", "s2"}, {"s4", "s5"}},
			[]link{{"s1", "s4"}, {"s1", "s5"}, {"s2", "s4"}, {"s2", "s5"}, {"s4", "s1"}, {"s4", "s2"}, {"s5", "s1"}, {"s5", "s2"}}},
		{"three groups", [][]string{{"s1"}, {"s2"}, {"s3"}},
			[]link{{"s1", "s2"}, {"s1", "s3"}, {"s2", "s1"}, {"s2", "s3"}, {"s3", "s1"}, {"s3", "s2"}}},
		{"one group cuts nothing", [][]string{{"s1", "s2"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.SortedFunc(maps.Keys(partitionCuts(tc.groups)), func(a, b link) int {
				return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to))
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("partitionCuts(%v) = %v, want %v", tc.groups, got, tc.want)
			}
		})
	}
}

func TestHalves(t *testing.T) {
	for _, tc := range []struct {
		in            []string
		first, second []string
	}{
		{[]string{"s2", "s3"}, []string{"s2"}, []string{"s3"}},
		{[]string{"s1", "s2", "s4", "s5"}, []string{"s1", "s2"}, []string{"s4", "s5"}},
		{[]string{"s1", "s2", "s3"}, []string{"s1", "s2"}, []string{"s3"}},
		{[]string{"s1"}, []string{"s1"}, []string{}},
	} {
		first, second := halves(tc.in)
		if !slices.Equal(first, tc.first) || !slices.Equal(second, tc.second) {
			t.Errorf("halves(%v) = %v, %v, want %v, %v", tc.in, first, second, tc.first, tc.second)
		}
		// The first half must not share its backing array's tail with the
		// second: appending to it would overwrite the second half.
		first = append(first, "x")
		if len(second) > 0 && second[0] == "x" {
			t.Errorf("halves(%v): appending to the first half changed the second", tc.in)
		}
	}
}
