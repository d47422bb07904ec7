package gcfloor

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		live, floor uint64
		base, want  int
	}{
		{"live heap a tenth of the floor", 100 * mib, gib, 100, 924},
		{"live heap half the floor: the floor is what GOGC 100 gives", 512 * mib, gib, 100, 100},
		{"live heap above half the floor keeps the operator's GOGC", 700 * mib, gib, 100, 100},
		{"live heap above the floor", 2 * gib, gib, 100, 100},
		{"the operator's higher GOGC wins", 300 * mib, gib, 400, 400},
		{"the operator's lower GOGC is raised only up to the floor", 300 * mib, gib, 50, 242},
		{"nothing live yet: counted as the runtime's 4 MiB minimum", 0, gib, 100, 25500},
		{"a tiny live heap counts as 4 MiB", 1, gib, 100, 25500},
		{"a floor under 4 MiB", 1, 2 * mib, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Percent(tc.live, tc.floor, tc.base)
			if got != tc.want {
				t.Fatalf("Percent(%d, %d, %d) = %d, want %d", tc.live, tc.floor, tc.base, got, tc.want)
			}
			if got > tc.base {
				// The goal lands at the floor, to within one percent of
				// live, and so does the runtime's minimum goal (4 MiB
				// scaled by GOGC/100).
				live := max(tc.live, 4*mib)
				goal := max(live+live*uint64(got)/100, 4*mib*uint64(got)/100)
				if goal < tc.floor || goal > tc.floor+live/100 {
					t.Fatalf("heap goal %d for GOGC %d, want the floor %d", goal, got, tc.floor)
				}
			}
		})
	}
}

func TestCap(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		floor, limit, goMemLimit uint64
		want                     uint64
	}{
		{"plenty of memory", gib, 64 * gib, math.MaxInt64, gib},
		{"a quarter of a small machine or cgroup", gib, 2 * gib, math.MaxInt64, 512 * mib},
		{"half of GOMEMLIMIT", gib, 64 * gib, gib, 512 * mib},
		{"memory unknown", gib, 0, math.MaxInt64, gib},
		{"the smallest bound wins", gib, 1 * gib, 800 * mib, 256 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Cap(tc.floor, tc.limit, tc.goMemLimit); got != tc.want {
				t.Fatalf("Cap(%d, %d, %d) = %d, want %d", tc.floor, tc.limit, tc.goMemLimit, got, tc.want)
			}
		})
	}
}

// TestKeepFollowsCollections runs the floor in this process: GOGC must rise
// once a collection has found the live heap small, must be looked at
// again after every later collection, and must be put back at the end.
func TestKeepFollowsCollections(t *testing.T) {
	base := int(int64(readUint(gogcMetric)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	seen := make(chan int, 16)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		keep(ctx, gib, base, func(p int) { seen <- p })
	}()
	next := func() int {
		select {
		case p := <-seen:
			return p
		case <-ctx.Done():
			t.Fatal("no collection was looked at within 30s")
			return 0
		}
	}
	next() // the first look, before any collection
	for i := range 3 {
		runtime.GC()
		if p := next(); p <= base {
			t.Fatalf("after collection %d GOGC is %d, want above %d with a live heap of %d bytes", i+1, p, base, readUint(liveHeapMetric))
		}
		// The runtime's own goal for the heap is the floor.
		if goal := readUint("/gc/heap/goal:bytes"); goal < gib*99/100 || goal > gib*101/100 {
			t.Fatalf("after collection %d the runtime's heap goal is %d bytes (live %d), want the floor, %d", i+1, goal, readUint(liveHeapMetric), gib)
		}
	}
	if got := int(int64(readUint(gogcMetric))); got <= base {
		t.Fatalf("the runtime's GOGC is %d, want above %d", got, base)
	}
	cancel()
	<-stopped
	if got := int(int64(readUint(gogcMetric))); got != base {
		t.Fatalf("GOGC %d after the floor stopped, want %d back", got, base)
	}
}

func TestAvailableMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the memory available is read on Linux only")
	}
	if got := AvailableMemory(); got < 64*mib {
		t.Fatalf("AvailableMemory() = %d bytes, want the machine's or the cgroup's memory", got)
	}
}
