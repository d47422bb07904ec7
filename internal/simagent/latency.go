package simagent

import (
	"math"
	"sync/atomic"
	"time"
)

// latencyBuckets is the number of buckets of a Latency. Bucket i counts the
// durations in (bound(i-1), bound(i)], bound(i) = 1µs·2^(i/4): four
// buckets per doubling, from 1µs to about an hour (the last bucket also
// takes anything longer).
const latencyBuckets = 128

// Latency is a histogram of durations over fixed log-spaced buckets, so
// that it costs the same memory (about 1 KiB) however many durations it
// has seen, and Observe allocates nothing and is safe to call
// concurrently. A quantile is the upper bound of the bucket it falls in:
// at most 19% above the true value.
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
	counts [latencyBuckets]atomic.Uint64
}

// latencyUnit is the upper bound of bucket 0.
const latencyUnit = time.Microsecond

// bucketOf returns the bucket d falls in.
func bucketOf(d time.Duration) int {
	if d <= latencyUnit {
		return 0
	}
	i := int(math.Ceil(4 * math.Log2(float64(d)/float64(latencyUnit))))
	return min(max(i, 0), latencyBuckets-1)
}

// bucketBound returns the upper bound of bucket i.
func bucketBound(i int) time.Duration {
	return time.Duration(float64(latencyUnit) * math.Exp2(float64(i)/4))
}

// Observe records one duration; negative ones (clocks apart) count as zero.
func (l *Latency) Observe(d time.Duration) { l.counts[bucketOf(d)].Add(1) }

// Count returns how many durations were observed; zero for nil.
func (l *Latency) Count() uint64 {
	if l == nil {
		return 0
	}
	var n uint64
	for i := range l.counts {
		n += l.counts[i].Load()
	}
	return n
}

// Quantile returns the duration below which a share q (0 to 1) of the
// observations fall, as the upper bound of its bucket; zero when nothing
// was observed.
func (l *Latency) Quantile(q float64) time.Duration {
	total := l.Count()
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(min(max(q, 0), 1) * float64(total)))
	rank = max(rank, 1)
	var seen uint64
	for i := range l.counts {
		seen += l.counts[i].Load()
		if seen >= rank {
			return bucketBound(i)
		}
	}
	// Observations arrived while counting; the last bucket holds them.
	return bucketBound(latencyBuckets - 1)
}

// Snapshot returns a copy of l as it is now, which later observations do
// not change; nil for nil.
func (l *Latency) Snapshot() *Latency {
	if l == nil {
		return nil
	}
	c := &Latency{}
	for i := range l.counts {
		c.counts[i].Store(l.counts[i].Load())
	}
	return c
}

// Since returns the observations of l that earlier (an earlier snapshot of
// it, or nil) does not hold: the histogram of an interval.
func (l *Latency) Since(earlier *Latency) *Latency {
	c := l.Snapshot()
	if c == nil || earlier == nil {
		return c
	}
	for i := range c.counts {
		now, before := c.counts[i].Load(), earlier.counts[i].Load()
		c.counts[i].Store(now - min(now, before))
	}
	return c
}
