package simagent

import (
	"sync"
	"testing"
	"time"
)

func TestLatencyQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		observe []time.Duration
		q       float64
		// want is the true quantile; the answer may exceed it by 1%
		// and never falls below it.
		want time.Duration
	}{
		{name: "empty", q: 0.99, want: 0},
		{name: "one", observe: []time.Duration{10 * time.Millisecond}, q: 0.5, want: 10 * time.Millisecond},
		{name: "median of three", observe: []time.Duration{time.Millisecond, 5 * time.Millisecond, time.Second}, q: 0.5, want: 5 * time.Millisecond},
		{name: "p99 takes the top", observe: []time.Duration{time.Millisecond, time.Millisecond, 2 * time.Second}, q: 0.99, want: 2 * time.Second},
		{name: "p0 takes the bottom", observe: []time.Duration{3 * time.Microsecond, time.Second}, q: 0, want: 3 * time.Microsecond},
		{name: "negative counts as the least", observe: []time.Duration{-time.Second}, q: 1, want: time.Microsecond},
		{name: "beyond the most", observe: []time.Duration{100 * time.Hour}, q: 1, want: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Latency
			for _, d := range tc.observe {
				l.Observe(d)
			}
			if got := l.Count(); got != uint64(len(tc.observe)) {
				t.Errorf("count %d, want %d", got, len(tc.observe))
			}
			got := l.Quantile(tc.q)
			if got < tc.want || float64(got) > float64(tc.want)*1.01+1 {
				t.Errorf("quantile %g = %s, want %s (up to 1%% more)", tc.q, got, tc.want)
			}
		})
	}
}

func TestLatencySnapshotAndSince(t *testing.T) {
	var l Latency
	l.Observe(time.Millisecond)
	before := l.Snapshot()
	l.Observe(time.Second)
	l.Observe(time.Second)
	if before.Count() != 1 {
		t.Errorf("snapshot changed: %d observations, want 1", before.Count())
	}
	d := l.Since(before)
	if d.Count() != 2 || d.Quantile(0) < time.Second {
		t.Errorf("since: %d observations from %s, want 2 of 1s", d.Count(), d.Quantile(0))
	}
	var nilLatency *Latency
	if nilLatency.Count() != 0 || nilLatency.Quantile(0.5) != 0 || l.Since(nil).Count() != 3 {
		t.Error("a nil Latency must read as empty")
	}
}

func TestLatencyConcurrentObserve(t *testing.T) {
	var l Latency
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 1000 {
				l.Observe(time.Duration(i) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	if got := l.Count(); got != 8000 {
		t.Errorf("count %d, want 8000", got)
	}
}

func TestLatencyObserveDoesNotAllocate(t *testing.T) {
	var l Latency
	if n := testing.AllocsPerRun(100, func() { l.Observe(3 * time.Millisecond) }); n != 0 {
		t.Errorf("Observe allocates %g times", n)
	}
}
