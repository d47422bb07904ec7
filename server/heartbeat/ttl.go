// Package heartbeat decides how often nodes must heartbeat.
package heartbeat

import (
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
}

// DefaultConfig returns the defaults of DESIGN.md section 10.
func DefaultConfig() Config {
	return Config{MinTTL: 10 * time.Second, MaxPerSecond: 50}
}

// TTL returns the interval within which a node must heartbeat next when
// nodes nodes are heartbeating: long enough that all of them together send
// at most MaxPerSecond heartbeats a second, never below MinTTL, plus a
// random stagger of up to the same again, so that nodes which started
// together spread out.
func (c Config) TTL(nodes int) time.Duration {
	base := c.MinTTL
	if c.MaxPerSecond > 0 {
		base = max(base, time.Duration(float64(nodes)/c.MaxPerSecond*float64(time.Second)))
	}
	if base <= 0 {
		return 0
	}
	return base + rand.N(base)
}
