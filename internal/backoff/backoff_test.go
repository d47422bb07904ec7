package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, 5 * time.Second
	for _, tc := range []struct {
		name   string
		jitter float64
		before int           // calls of Next before the one checked
		hint   time.Duration // of the checked call
		want   time.Duration // without jitter
	}{
		{"first", 0, 0, 0, lo},
		{"doubles", 0, 3, 0, 8 * lo},
		{"capped", 0, 30, 0, hi},
		{"hint followed", 0, 0, time.Second, time.Second},
		{"hint capped", 0, 0, time.Minute, hi},
		{"hint below the backoff", 0, 5, time.Second, 32 * lo},
		{"jitter", 0.25, 3, 0, 8 * lo},
		{"jitter never over the longest", 0.25, 30, 0, hi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 100 {
				b := Policy{Initial: lo, Max: hi, Jitter: tc.jitter}.New()
				for range tc.before {
					b.Next(0)
				}
				got := b.Next(tc.hint)
				least := time.Duration(float64(tc.want) * (1 - tc.jitter))
				most := min(time.Duration(float64(tc.want)*(1+tc.jitter)), hi)
				if got < least || got > most {
					t.Fatalf("delay %s, want within [%s, %s]", got, least, most)
				}
			}
		})
	}
}

func TestReset(t *testing.T) {
	b := Policy{Initial: time.Millisecond, Max: time.Second}.New()
	for range 5 {
		b.Next(0)
	}
	b.Reset()
	if got := b.Next(0); got != time.Millisecond {
		t.Fatalf("after Reset: %s, want the first delay", got)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep after cancel: %v", err)
	}
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
}
