package heartbeat

import (
	"context"
	"log/slog"
	"math"
	"time"
)

// guard is the mass-failure guard. When a large share of the fleet misses
// its heartbeats at once, the servers' own network is the likely fault, so
// the nodes are marked at a throttled rate: those that come back meanwhile
// are never marked. guard is plain bookkeeping; Timers holds its lock.
type guard struct {
	cfg Config
	// expiries are the times of the expiries within the window, oldest first.
	expiries []time.Time
	engaged  bool
	// engagements counts engagements over the Timers' life.
	engagements uint64
	// marked and cameBack count, for the current engagement, the nodes
	// handed to the ExpireFunc and the nodes that heartbeat while queued.
	marked, cameBack int
}

// guardEvent is a change of the guard worth a log line, produced under the
// lock and logged after it is released.
type guardEvent struct {
	kind     guardEventKind
	missed   int
	fleet    int
	marked   int
	cameBack int
}

// guardEventKind says whether the guard engaged or disengaged.
type guardEventKind int

const (
	guardQuiet guardEventKind = iota
	guardEngaged
	guardDisengaged
)

// threshold returns how many expiries within the window engage the guard
// when fleet nodes are tracked: the configured share of the expiries the
// window would see if the whole fleet went silent at once. TTLs are
// staggered over a base TTL that grows with the fleet (1,000s for 50,000
// nodes), so a silent fleet expires over that span, not within the window;
// counting the share of the whole fleet instead would let a large fleet's
// outage mark a third of it before the guard noticed.
func (g *guard) threshold(fleet int) int {
	expected := float64(fleet)
	if base := g.cfg.baseTTL(fleet); base > g.cfg.MassFailureWindow {
		expected *= float64(g.cfg.MassFailureWindow) / float64(base)
	}
	// The epsilon keeps a product such as 0.1*30 = 3.0000000000000004 from
	// rounding up to 4.
	share := int(math.Ceil(g.cfg.MassFailureFraction*expected - 1e-9))
	return max(g.cfg.MassFailureMinNodes, share, 1)
}

// expired records a timer expiry at now, with fleet nodes tracked, and
// engages the guard when the window holds enough expiries.
func (g *guard) expired(now time.Time, fleet int) guardEvent {
	if !g.cfg.guardEnabled() {
		return guardEvent{}
	}
	g.prune(now)
	g.expiries = append(g.expiries, now)
	missed := len(g.expiries)
	if g.engaged || missed < g.threshold(fleet) {
		return guardEvent{}
	}
	g.engaged = true
	g.engagements++
	g.marked, g.cameBack = 0, 0
	return guardEvent{kind: guardEngaged, missed: missed, fleet: fleet}
}

// queueEmptied is called when no node waits to be marked. It disengages the
// guard once the window has fallen below the threshold; while it cannot, it
// returns how long until the oldest expiry leaves the window, when it is
// worth asking again (0 means there is no reason to ask again).
func (g *guard) queueEmptied(now time.Time, fleet int) (guardEvent, time.Duration) {
	if !g.engaged {
		return guardEvent{}, 0
	}
	g.prune(now)
	if len(g.expiries) >= g.threshold(fleet) {
		return guardEvent{}, g.expiries[0].Add(g.cfg.MassFailureWindow).Sub(now)
	}
	g.engaged = false
	return guardEvent{kind: guardDisengaged, marked: g.marked, cameBack: g.cameBack}, 0
}

// markedOne counts a node handed to the ExpireFunc.
func (g *guard) markedOne() {
	if g.engaged {
		g.marked++
	}
}

// cameBackOne counts a queued node that heartbeat before it was marked.
func (g *guard) cameBackOne() {
	if g.engaged {
		g.cameBack++
	}
}

// reset forgets the window and disengages, for a new term of leadership.
func (g *guard) reset() {
	g.expiries = nil
	g.engaged = false
	g.marked, g.cameBack = 0, 0
}

// prune drops the expiries that are no longer within the window.
func (g *guard) prune(now time.Time) {
	cutoff := now.Add(-g.cfg.MassFailureWindow)
	i := 0
	for i < len(g.expiries) && !g.expiries[i].After(cutoff) {
		i++
	}
	if i == len(g.expiries) {
		g.expiries = g.expiries[:0]
		return
	}
	g.expiries = g.expiries[i:]
}

// log writes the line for ev, if any.
func (ev guardEvent) log(logger *slog.Logger, cfg Config) {
	switch ev.kind {
	case guardEngaged:
		logger.LogAttrs(context.Background(), slog.LevelWarn,
			"many nodes missed their heartbeats at once; the servers' own network is the likely fault, so nodes are marked at a throttled rate",
			slog.Int("missed", ev.missed),
			slog.Int("tracked", ev.fleet),
			slog.Duration("window", cfg.MassFailureWindow),
			slog.Float64("nodes_per_second", cfg.ThrottledMarkRate))
	case guardDisengaged:
		logger.LogAttrs(context.Background(), slog.LevelInfo,
			"heartbeat mass-failure guard disengaged",
			slog.Int("marked", ev.marked),
			slog.Int("came_back", ev.cameBack))
	}
}
