package heartbeat

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// testDeadline bounds every wait in these tests.
const testDeadline = 5 * time.Second

// call is one ExpireFunc call seen by a test.
type call struct {
	id string
	at time.Time
}

// recordingExpire returns an ExpireFunc that reports each call on the
// returned channel and answers keep.
func recordingExpire(keep bool) (ExpireFunc, <-chan call) {
	calls := make(chan call, 1024)
	return func(_ context.Context, id string) bool {
		calls <- call{id: id, at: time.Now()}
		return keep
	}, calls
}

// nextCall waits for the next ExpireFunc call.
func nextCall(t *testing.T, calls <-chan call) call {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(testDeadline):
		t.Fatal("no ExpireFunc call within the deadline")
		return call{}
	}
}

// noCall asserts that no ExpireFunc call arrives within d.
func noCall(t *testing.T, calls <-chan call, d time.Duration) {
	t.Helper()
	select {
	case c := <-calls:
		t.Fatalf("unexpected ExpireFunc call for node %s", c.id)
	case <-time.After(d):
	}
}

// eventually waits until cond holds, failing the test at the deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(testDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// startTimers starts timers for nodeIDs and stops them when the test ends.
func startTimers(t *testing.T, cfg Config, expire ExpireFunc, logger *slog.Logger, nodeIDs ...string) *Timers {
	t.Helper()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	timers := NewTimers(cfg, expire, logger)
	if err := timers.Start(t.Context(), nodeIDs); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(timers.Stop)
	return timers
}

// quietConfig is a configuration with short durations and no guard.
func quietConfig() Config {
	return Config{
		MinTTL:       50 * time.Millisecond,
		MaxPerSecond: 1000,
		Grace:        50 * time.Millisecond,
		FailoverTTL:  10 * time.Second,
	}
}

// logRecord is one captured log line.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

// captureHandler is a slog.Handler that keeps every record.
type captureHandler struct {
	mu      sync.Mutex
	records []logRecord
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, rec)
	return nil
}

func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *captureHandler) WithGroup(string) slog.Handler { return h }

// at returns the captured records of one level.
func (h *captureHandler) at(level slog.Level) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range h.records {
		if r.level == level {
			out = append(out, r)
		}
	}
	return out
}
