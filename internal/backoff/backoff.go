// Package backoff paces retries. It is the one mechanism drover's retry
// loops use: the scheduler workers (dequeue, plan submission), a server
// forming, joining and announcing itself to its cluster, and the simulated
// agents. It wraps cenkalti/backoff's exponential back-off and adds what
// those loops share: a ceiling on every delay, jitter that never passes
// it, and a server's own retry hint (gRPC RetryInfo) taken as a floor.
package backoff

import (
	"context"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"
)

// Policy is how a loop paces its retries: the first delay, doubling up to
// the longest. Jitter (0 to 1) spreads each delay over ±Jitter of itself,
// so that clients that failed together do not retry together; 0 keeps
// the delays exact.
type Policy struct {
	Initial, Max time.Duration
	Jitter       float64
}

// Backoff paces the retries of one loop. It is not safe for concurrent
// use: each loop holds its own.
type Backoff struct {
	exp cenkalti.ExponentialBackOff
	max time.Duration
}

// New returns a Backoff at the policy's first delay.
func (p Policy) New() *Backoff {
	b := &Backoff{max: p.Max, exp: cenkalti.ExponentialBackOff{
		InitialInterval: p.Initial, RandomizationFactor: p.Jitter, Multiplier: 2, MaxInterval: p.Max,
	}}
	b.exp.Reset()
	return b
}

// Next returns the delay before the next attempt, and doubles the one
// after: at least hint (the delay a server asked for, zero for none), and
// never over the policy's longest.
func (b *Backoff) Next(hint time.Duration) time.Duration {
	return min(max(b.exp.NextBackOff(), hint), b.max)
}

// Reset starts again from the first delay, after a success.
func (b *Backoff) Reset() { b.exp.Reset() }

// Sleep waits d, or until ctx ends and returns its error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
