package worker

import (
	"context"
	"time"
)

// backoff is base doubled attempt times, capped at limit.
func backoff(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for range attempt {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// sleep waits d or until ctx ends, returning ctx.Err() then.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
