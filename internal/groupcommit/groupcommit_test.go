package groupcommit

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestCommitterBound checks that the committer never puts more weight into
// one entry than its bound, unless a single item is heavier than the bound.
func TestCommitterBound(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int
		want    [][]int // the weights of each entry written, in order
	}{
		{"fills exactly", []int{4, 6, 3}, [][]int{{4, 6}, {3}}},
		{"one more would pass the bound", []int{4, 4, 4}, [][]int{{4, 4}, {4}}},
		{"heavier than the bound goes alone", []int{5, 12, 1}, [][]int{{5}, {12}, {1}}},
		{"each would pass the bound with the next", []int{9, 2, 9}, [][]int{{9}, {2}, {9}}},
		{"under the bound stays one", []int{1, 2, 3}, [][]int{{1, 2, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var written [][]int
			c := &Committer[int]{
				// The window never ends during the test: only the bound and
				// the final windowEnded write groups.
				Window:    time.Hour,
				MaxWeight: 10,
				Write: func(items []int) (uint64, any, error) {
					mu.Lock()
					defer mu.Unlock()
					written = append(written, slices.Clone(items))
					return 1, nil, nil
				},
			}
			var groups []*Group[int]
			for _, w := range tc.weights {
				g, _ := c.add(w, w)
				if len(groups) == 0 || groups[len(groups)-1] != g {
					groups = append(groups, g)
				}
			}
			if g := c.pending; g != nil {
				c.windowEnded(g)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, g := range groups {
				select {
				case <-g.done:
				case <-ctx.Done():
					t.Fatal("a group was never written")
				}
			}
			// In the order they filled; each must have been written once.
			mu.Lock()
			defer mu.Unlock()
			got := make([][]int, len(groups))
			for i, g := range groups {
				got[i] = g.items
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("groups %v, want %v", got, tc.want)
			}
			if len(written) != len(tc.want) {
				t.Errorf("%d entries written %v, want %d", len(written), written, len(tc.want))
			}
		})
	}
}
