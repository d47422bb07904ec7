// Package gcfloor lets the Go heap grow to a floor before the collector
// runs. With GOGC at 100 the collector starts whenever the heap has doubled
// since the last collection, so a server whose live state is small collects
// after every few hundred megabytes it allocates under load. Each
// collection marks the whole live heap, and the servers spent about a
// quarter of their CPU doing so in the c1m benchmark.
// A floor raises GOGC while the live heap is below half the floor, so that
// the next collection starts near the floor instead; above that, GOGC is
// what the operator set. The memory given up is at most the floor, unlike a
// higher GOGC, which multiplies whatever the state grows to.
package gcfloor

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Metric names read from runtime/metrics.
const (
	liveHeapMetric = "/gc/heap/live:bytes"
	gogcMetric     = "/gc/gogc:percent"
	memLimitMetric = "/gc/gomemlimit:bytes"
)

// minLive is the live heap Percent assumes at least: the Go runtime's
// own minimum heap goal is 4 MiB scaled by GOGC/100, so a GOGC computed
// from a smaller live heap would put that minimum, and the heap, above the
// floor. Before the first collection the runtime reports no live heap.
const minLive = 4 << 20

// Percent is the GOGC that makes the next collection start when the heap
// reaches floor, given that live bytes survived the last collection:
// never below base, the GOGC the operator set.
func Percent(live, floor uint64, base int) int {
	live = max(live, minLive)
	if floor <= live {
		return base
	}
	p := int(math.Ceil((float64(floor)/float64(live) - 1) * 100))
	return max(base, p)
}

// Cap returns floor lowered to what the process may use: at most a quarter
// of the memory available to it (limit, the smaller of the machine's memory
// and its cgroup's limit; 0 if unknown) and at most half of the Go memory
// limit (GOMEMLIMIT), so that the floor never brings a server near either.
func Cap(floor, limit, goMemLimit uint64) uint64 {
	if limit > 0 {
		floor = min(floor, limit/4)
	}
	if goMemLimit > 0 && goMemLimit != math.MaxInt64 {
		floor = min(floor, goMemLimit/2)
	}
	return floor
}

// Run keeps the floor until ctx ends: after every collection it sets GOGC
// from the live heap, and on return it puts back the GOGC the process had.
// It does nothing when floor is 0 or the collector is off (GOGC=off).
func Run(ctx context.Context, floor uint64, logger *slog.Logger) {
	base := int(int64(readUint(gogcMetric)))
	if floor == 0 || base < 0 {
		return
	}
	capped := Cap(floor, AvailableMemory(), readUint(memLimitMetric))
	if capped < floor {
		logger.Info("gc heap floor lowered to fit the memory available", "requested_bytes", floor, "floor_bytes", capped)
	}
	if capped == 0 {
		return
	}
	keep(ctx, capped, base, func(int) {})
}

// keep sets GOGC for floor after every collection until ctx ends, then sets
// base back. afterCycle is called with the GOGC in force after each
// collection has been looked at (tests wait on it).
func keep(ctx context.Context, floor uint64, base int, afterCycle func(gogc int)) {
	cycles := newCycleHook()
	defer cycles.stop()
	defer debug.SetGCPercent(base)
	set := base
	for {
		if p := Percent(readUint(liveHeapMetric), floor, base); p != set {
			debug.SetGCPercent(p)
			set = p
		}
		afterCycle(set)
		select {
		case <-ctx.Done():
			return
		case <-cycles.done:
		}
	}
}

// readUint reads one runtime metric of kind uint64 (0 if unsupported).
func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// cycleHook signals done after each collection: a cleanup attached to an
// unreachable object runs once the collector has found it unreachable,
// and each one attaches the next.
type cycleHook struct {
	done    chan struct{}
	stopped atomic.Bool
}

// sentinel is what the cleanup is attached to; it must not be a tiny
// allocation (pointer-free and under 16 bytes), whose cleanups may never run.
type sentinel struct{ _ [32]byte }

func newCycleHook() *cycleHook {
	h := &cycleHook{done: make(chan struct{}, 1)}
	h.arm()
	return h
}

func (h *cycleHook) arm() {
	runtime.AddCleanup(new(sentinel), (*cycleHook).collected, h)
}

func (h *cycleHook) collected() {
	if h.stopped.Load() {
		return
	}
	// Arm before signalling: whoever wakes on done may force the next
	// collection at once, and a sentinel allocated after that collection
	// began would not be found unreachable until the one after it.
	h.arm()
	select {
	case h.done <- struct{}{}:
	default: // the previous signal is still unread; one is enough
	}
}

func (h *cycleHook) stop() { h.stopped.Store(true) }
