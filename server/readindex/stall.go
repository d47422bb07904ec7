package readindex

import (
	"context"
	"sync/atomic"
	"time"
)

// StallDetector notices that this process did not run for a while: it was
// stopped (SIGSTOP, a debugger), its VM was frozen, or the machine was
// starved. A goroutine ticks every Tick; a tick that comes more than
// Threshold late marks a stall, and the stall counts as recent for Window
// after it ended. A stall that is still unseen (the ticking goroutine has
// not run since the process resumed) counts as recent too, so Recent is
// right even before the ticker catches up.
type StallDetector struct {
	tick, threshold, window time.Duration

	// base anchors the monotonic clock; times below are offsets from it.
	base     time.Time
	lastTick atomic.Int64
	stallEnd atomic.Int64 // offset at which the last stall was seen to end; 0 if none
}

// NewStallDetector returns a detector; Run starts it.
func NewStallDetector(tick, threshold, window time.Duration) *StallDetector {
	d := &StallDetector{tick: tick, threshold: threshold, window: window, base: time.Now()}
	d.lastTick.Store(d.now())
	return d
}

// now is the monotonic time since base.
func (d *StallDetector) now() int64 { return int64(time.Since(d.base)) }

// Run ticks until ctx ends.
func (d *StallDetector) Run(ctx context.Context) {
	t := time.NewTicker(d.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.observe(d.now())
		}
	}
}

// observe records a tick at now.
func (d *StallDetector) observe(now int64) {
	if time.Duration(now-d.lastTick.Load()) > d.tick+d.threshold {
		d.stallEnd.Store(now)
	}
	d.lastTick.Store(now)
}

// Recent reports whether the process was stalled within the window, or is
// only now resuming from a stall its ticker has not yet seen.
func (d *StallDetector) Recent() bool { return d.recentAt(d.now()) }

func (d *StallDetector) recentAt(now int64) bool {
	if time.Duration(now-d.lastTick.Load()) > d.tick+d.threshold {
		return true
	}
	end := d.stallEnd.Load()
	return end != 0 && time.Duration(now-end) < d.window
}
