// Package heartbeat decides how often nodes must heartbeat and keeps the
// leader's heartbeat timers.
package heartbeat

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Config is the heartbeat policy.
type Config struct {
	// MinTTL is the shortest interval a node is given (10s).
	MinTTL time.Duration
	// MaxPerSecond is the heartbeat rate the servers aim to stay under as
	// the fleet grows (50 per second).
	MaxPerSecond float64
	// Grace is added to a node's timer but not to the TTL handed to the
	// node, so a heartbeat that arrives a little late does not mark it (10s).
	Grace time.Duration
	// FailoverTTL is the flat timer every tracked node gets when a server
	// becomes leader, so that an election never marks the fleet down (5m).
	FailoverTTL time.Duration
	// MassFailureFraction is the share of the tracked fleet whose expiry
	// within MassFailureWindow engages the mass-failure guard (one third);
	// 0 disables the guard.
	MassFailureFraction float64
	// MassFailureWindow is how far back expiries count towards the guard
	// (10s).
	MassFailureWindow time.Duration
	// MassFailureMinNodes is the fewest expiries within the window that
	// engage the guard, so a small fleet losing one node is not taken for
	// a network fault (10).
	MassFailureMinNodes int
	// ThrottledMarkRate is how many nodes per second are marked while the
	// guard is engaged (10).
	ThrottledMarkRate float64
}

// DefaultConfig returns the defaults: Nomad's, where both have the knob.
func DefaultConfig() Config {
	return Config{
		MinTTL:              10 * time.Second,
		MaxPerSecond:        50,
		Grace:               10 * time.Second,
		FailoverTTL:         5 * time.Minute,
		MassFailureFraction: 1.0 / 3,
		MassFailureWindow:   10 * time.Second,
		MassFailureMinNodes: 10,
		ThrottledMarkRate:   10,
	}
}

// Validate reports every setting that makes no sense.
func (c Config) Validate() error {
	var errs []error
	negative := func(name string, bad bool) {
		if bad {
			errs = append(errs, fmt.Errorf("heartbeat %s must not be negative", name))
		}
	}
	// A zero MinTTL would hand a small fleet a zero TTL; a zero FailoverTTL
	// would expire every node as soon as a leader is elected.
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("heartbeat %s %s: must be above 0", name, d))
		}
	}
	positive("min TTL", c.MinTTL)
	negative("max per second", c.MaxPerSecond < 0)
	negative("grace", c.Grace < 0)
	positive("failover TTL", c.FailoverTTL)
	negative("mass-failure fraction", c.MassFailureFraction < 0)
	negative("mass-failure window", c.MassFailureWindow < 0)
	negative("mass-failure min nodes", c.MassFailureMinNodes < 0)
	negative("throttled mark rate", c.ThrottledMarkRate < 0)
	if c.MassFailureFraction > 1 {
		errs = append(errs, fmt.Errorf("heartbeat mass-failure fraction %g is above 1", c.MassFailureFraction))
	}
	if c.guardEnabled() && c.ThrottledMarkRate == 0 {
		errs = append(errs, errors.New("heartbeat throttled mark rate must be above 0 while the mass-failure guard is enabled"))
	}
	if c.guardEnabled() && c.MassFailureWindow == 0 {
		errs = append(errs, errors.New("heartbeat mass-failure window must be above 0 while the mass-failure guard is enabled"))
	}
	return errors.Join(errs...)
}

// guardEnabled reports whether mass failures are throttled at all.
func (c Config) guardEnabled() bool {
	return c.MassFailureFraction > 0
}

// TTL returns the interval within which a node must heartbeat next when
// nodes nodes are heartbeating: long enough that all of them together send
// at most MaxPerSecond heartbeats a second, never below MinTTL, plus a
// random stagger of up to the same again, so that nodes which started
// together spread out.
func (c Config) TTL(nodes int) time.Duration {
	base := c.baseTTL(nodes)
	if base <= 0 {
		return 0
	}
	return base + rand.N(base)
}

// baseTTL is the TTL before its random stagger.
func (c Config) baseTTL(nodes int) time.Duration {
	base := c.MinTTL
	if c.MaxPerSecond > 0 {
		base = max(base, time.Duration(float64(nodes)/c.MaxPerSecond*float64(time.Second)))
	}
	return base
}

// failoverTTL is the timer every node gets when a server becomes leader:
// FailoverTTL, unless its nodes may have been handed longer intervals (up
// to twice the base TTL, with the stagger); then that plus the grace. The
// base is the one TTL hands out, MinTTL included: with the defaults a fleet
// past 7,500 nodes has intervals beyond 5 minutes, and so does any fleet
// with a MinTTL above 2.5 minutes; a flat 5 minutes would mark some of it
// down after every election.
func (c Config) failoverTTL(nodes int) time.Duration {
	longest := 2 * c.baseTTL(nodes)
	if longest > c.FailoverTTL {
		return longest + c.Grace
	}
	return c.FailoverTTL
}
