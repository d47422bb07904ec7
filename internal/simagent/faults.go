package simagent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Faults makes a share of a fleet's nodes flaky: each goes silent now and
// then (no calls at all: heartbeats stop, its GetAllocs poll is cancelled)
// and comes back, as a machine behind a failing network would.
type Faults struct {
	// Fraction is the share (0 to 1) of nodes that are flaky, spread
	// evenly over Config.Nodes by index (see Flaky).
	Fraction float64
	// Every is the period of a flaky node: it goes silent once per Every,
	// first one Every after Start, with the nodes' phases spread over the
	// period so that they do not all leave at once.
	Every time.Duration
	// Offline is how long it stays silent; less than Every.
	Offline time.Duration
	// ReorderOnReturn makes a returning agent send its first Register,
	// heartbeat, allocation report (what it runs) and GetAllocs
	// concurrently, each after a random delay of up to ReorderSpread and
	// retried until it succeeds, so that the servers see them in any
	// order. Without it an agent returns the usual way: heartbeat first.
	ReorderOnReturn bool
	// ReorderSpread bounds those delays (DefaultReorderSpread).
	ReorderSpread time.Duration
}

// DefaultReorderSpread is the default of Faults.ReorderSpread.
const DefaultReorderSpread = 200 * time.Millisecond

// enabled reports whether any node is flaky.
func (f Faults) enabled() bool { return f.Fraction > 0 }

func (f Faults) validate() error {
	if f.Fraction < 0 || f.Fraction > 1 || math.IsNaN(f.Fraction) {
		return fmt.Errorf("simagent: flaky fraction %g must be between 0 and 1", f.Fraction)
	}
	if !f.enabled() {
		return nil
	}
	if f.Every <= 0 || f.Offline <= 0 || f.Offline >= f.Every {
		return fmt.Errorf("simagent: flaky nodes need 0 < offline (%s) < every (%s)", f.Offline, f.Every)
	}
	if f.ReorderSpread < 0 {
		return errors.New("simagent: negative reorder spread")
	}
	return nil
}

// Flaky reports whether node i of n is flaky with faults f, and its rank
// among the flaky nodes. Node i is flaky when ⌊(i+1)·Fraction⌋ passes
// ⌊i·Fraction⌋: ⌊n·Fraction⌋ nodes, evenly spread.
func (f Faults) Flaky(i int) (rank int, ok bool) {
	if !f.enabled() {
		return 0, false
	}
	before := int(math.Floor(float64(i) * f.Fraction))
	after := int(math.Floor(float64(i+1) * f.Fraction))
	return before, after > before
}

// faultState is what a flaky agent knows of its own outage. Its calls run
// under online, which ends when the agent goes silent; back is closed when
// it returns.
type faultState struct {
	// phase is how long after Start the first period begins.
	phase time.Duration

	mu      sync.Mutex
	offline bool
	online  context.Context
	cancel  context.CancelFunc
	back    chan struct{}
}

// newFaultState prepares the outages of the flaky node of the given rank
// among count flaky nodes.
func newFaultState(f Faults, rank, count int) *faultState {
	phase := time.Duration(0)
	if count > 0 {
		phase = time.Duration(float64(f.Every) * float64(rank) / float64(count))
	}
	return &faultState{phase: phase, back: make(chan struct{})}
}

// begin starts the agent online under the fleet's ctx.
func (s *faultState) begin(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.online, s.cancel = context.WithCancel(ctx)
	close(s.back)
}

// current returns the context calls run under now, or false while the
// agent is silent.
func (s *faultState) current() (context.Context, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.online, !s.offline && s.online != nil
}

// await returns the context to call under, waiting while the agent is
// silent; waited says it did. It returns false once ctx ends.
func (s *faultState) await(ctx context.Context) (online context.Context, waited, ok bool) {
	for {
		s.mu.Lock()
		online, back, live := s.online, s.back, !s.offline && s.online != nil
		s.mu.Unlock()
		if live {
			return online, waited, true
		}
		select {
		case <-ctx.Done():
			return nil, waited, false
		case <-back:
			waited = true
		}
	}
}

// goOffline cancels the agent's calls and keeps new ones from starting.
func (s *faultState) goOffline() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offline = true
	s.cancel()
	s.back = make(chan struct{})
}

// goOnline lets the agent call again, under a new context of ctx, which it
// returns.
func (s *faultState) goOnline(ctx context.Context) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offline = false
	s.online, s.cancel = context.WithCancel(ctx)
	close(s.back)
	return s.online
}

// isOffline reports whether the agent is silent now.
func (s *faultState) isOffline() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offline
}
