package simagent

import (
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency records durations in an HDR histogram (HdrHistogram), from 1µs
// to an hour at 2 significant digits: a quantile is within 1% of the true
// value and never below it, and the memory (about 30 KiB) does not grow
// with the observations. Observe allocates nothing and is safe to
// call concurrently; the zero value is ready to use.
//
// A fleet keeps two (see Stats):
//   - UpdateAlloc latency: how long each answered Node.UpdateAlloc call
//     took, from sending it to its answer.
//   - GetAllocs latency: for each allocation change an agent receives in a
//     GetAllocs answer (an allocation whose modify_index is past the
//     agent's last answer), the time from the servers' write (the
//     allocation's modify_time) to the agent's receipt: the delay with
//     which a placement or a stop reaches its agent. It compares the
//     servers' clock with the agent's, so it means most on one machine.
type Latency struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram // microseconds; nil until the first use
}

// Bounds of what a Latency tells apart, in microseconds: anything shorter
// counts as the least (clocks apart give negative ones), anything longer
// as the most.
const (
	latencyLeast       = 1
	latencyMost        = int64(time.Hour / time.Microsecond)
	latencySignificant = 2
)

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(latencyLeast, latencyMost, latencySignificant)
}

// Observe records one duration.
func (l *Latency) Observe(d time.Duration) {
	us := min(max(d.Microseconds(), latencyLeast), latencyMost)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		l.h = newHistogram()
	}
	_ = l.h.RecordValue(us) // in range by construction
}

// Count returns how many durations were observed; zero for nil.
func (l *Latency) Count() uint64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		return 0
	}
	return uint64(l.h.TotalCount())
}

// Quantile returns the duration below which a share q (0 to 1) of the
// observations fall; zero when nothing was observed.
func (l *Latency) Quantile(q float64) time.Duration {
	if l.Count() == 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// At exactly 0 the library answers the low end of the first value's
	// bucket; just above, its high end, as for every other quantile.
	p := min(max(q*100, math.SmallestNonzeroFloat64), 100)
	return time.Duration(l.h.ValueAtQuantile(p)) * time.Microsecond
}

// Snapshot returns a copy of l as it is now, which later observations do
// not change; nil for nil.
func (l *Latency) Snapshot() *Latency {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		return &Latency{}
	}
	return &Latency{h: hdrhistogram.Import(l.h.Export())}
}

// Since returns the observations of l that earlier (an earlier snapshot of
// it, or nil) does not hold: the histogram of an interval.
func (l *Latency) Since(earlier *Latency) *Latency {
	c := l.Snapshot()
	if c == nil || c.h == nil || earlier == nil {
		return c
	}
	before := earlier.Snapshot()
	if before.h == nil {
		return c
	}
	// Both have the same bounds and precision, so the same buckets.
	now, then := c.h.Export(), before.h.Export()
	for i := range now.Counts {
		if i < len(then.Counts) {
			now.Counts[i] -= min(now.Counts[i], then.Counts[i])
		}
	}
	return &Latency{h: hdrhistogram.Import(now)}
}
