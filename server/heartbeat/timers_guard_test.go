package heartbeat

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// guardConfig fails a whole fleet at once (a short failover TTL) while nodes
// that heartbeat get a TTL far beyond the test.
func guardConfig() Config {
	return Config{
		MinTTL: 10 * time.Second,
		// So high that the fleet never lengthens TTLs or the failover TTL.
		MaxPerSecond:        1e6,
		Grace:               time.Second,
		FailoverTTL:         50 * time.Millisecond,
		MassFailureFraction: 1.0 / 3,
		MassFailureWindow:   300 * time.Millisecond,
		MassFailureMinNodes: 5,
		ThrottledMarkRate:   20,
	}
}

// fleet returns n node ids.
func fleet(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%02d", i)
	}
	return ids
}

func TestGuardThrottlesMassFailure(t *testing.T) {
	cfg := guardConfig()
	logs := &captureHandler{}
	expire, calls := recordingExpire(false)
	timers := startTimers(t, cfg, expire, slog.New(logs), fleet(30)...)

	eventually(t, "the guard to engage", func() bool { return timers.Stats().Throttled })

	var got []call
	for range 30 {
		got = append(got, nextCall(t, calls))
	}
	first, last := got[0].at, got[len(got)-1].at
	early := 0
	for _, c := range got {
		if c.at.Sub(first) < 300*time.Millisecond {
			early++
		}
	}
	if early >= 30 {
		t.Fatalf("all %d nodes marked within 300ms of the first: not throttled", early)
	}
	// At most the ten expiries before the guard engaged go unthrottled; the
	// other twenty wait for the limiter at 20 a second.
	if span := last.Sub(first); span < 500*time.Millisecond {
		t.Fatalf("30 nodes marked within %s, want the throttled rate to spread them", span)
	}

	eventually(t, "the guard to disengage", func() bool { return !timers.Stats().Throttled })
	s := timers.Stats()
	if s.ThrottleEngagements != 1 || s.Expired != 30 || s.Marked != 30 || s.Tracked != 0 || s.Pending != 0 {
		t.Fatalf("stats %+v, want one engagement, 30 expired and marked, nothing left", s)
	}
	warns := logs.at(slog.LevelWarn)
	if len(warns) != 1 {
		t.Fatalf("%d warnings, want one per engagement", len(warns))
	}
	// Nodes marked before the guard engaged are no longer tracked, so the
	// fleet the warning reports may have shrunk below 30.
	missed, tracked := warns[0].attrs["missed"].Int64(), warns[0].attrs["tracked"].Int64()
	// With a 10s base TTL and a 300ms window, a silent fleet of 30 would
	// see about one expiry in the window, so the floor of 5 decides.
	if tracked > 30 || missed < 5 {
		t.Fatalf("warning says %d missed of %d tracked, want at least the floor of 5", missed, tracked)
	}
	// The line is written just after the guard state changes.
	eventually(t, "the disengagement to be logged", func() bool { return len(logs.at(slog.LevelInfo)) == 1 })
}

func TestGuardSparesNodesThatComeBack(t *testing.T) {
	cfg := guardConfig()
	logs := &captureHandler{}
	calls := make(chan call, 64)
	release := make(chan struct{})
	firstCall := true
	expire := func(ctx context.Context, id string) bool {
		calls <- call{id: id, at: time.Now()}
		if firstCall {
			// Hold the marker so the rest of the fleet stays queued while
			// the test resets some of it.
			firstCall = false
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return false
	}
	nodes := fleet(30)
	timers := startTimers(t, cfg, expire, slog.New(logs), nodes...)

	held := nextCall(t, calls).id
	eventually(t, "the whole fleet to expire", func() bool { return timers.Stats().Expired == 30 })
	if s := timers.Stats(); !s.Throttled || s.Pending != 29 {
		t.Fatalf("stats %+v, want throttled with 29 pending", s)
	}

	var cameBack, missing []string
	for _, id := range nodes {
		switch {
		case id == held:
		case len(cameBack) < 20:
			cameBack = append(cameBack, id)
		default:
			missing = append(missing, id)
		}
	}
	for _, id := range cameBack {
		if _, err := timers.Reset(id); err != nil {
			t.Fatalf("Reset(%s): %v", id, err)
		}
	}
	if s := timers.Stats(); s.Pending != 9 {
		t.Fatalf("pending %d after 20 heartbeats, want 9", s.Pending)
	}
	close(release)

	marked := []string{held}
	for range missing {
		marked = append(marked, nextCall(t, calls).id)
	}
	eventually(t, "the guard to disengage", func() bool { return !timers.Stats().Throttled })
	eventually(t, "the disengagement to be logged", func() bool { return len(logs.at(slog.LevelInfo)) == 1 })
	noCall(t, calls, 100*time.Millisecond)

	slices.Sort(marked)
	want := append([]string{held}, missing...)
	slices.Sort(want)
	if !slices.Equal(marked, want) {
		t.Fatalf("marked %v, want %v", marked, want)
	}
	if s := timers.Stats(); s.Tracked != 20 || s.Pending != 0 || s.Marked != 10 {
		t.Fatalf("stats %+v, want the 20 returned nodes tracked and 10 marked", s)
	}
	infos := logs.at(slog.LevelInfo)
	if len(infos) != 1 || infos[0].attrs["came_back"].Int64() != 20 {
		t.Fatalf("info lines %+v, want one disengagement with 20 came back", infos)
	}
}

func TestSmallFleetNeverThrottles(t *testing.T) {
	tests := []struct {
		name     string
		nodes    int
		heartbit int // nodes that heartbeat and so do not expire
	}{
		{"one of three expires", 3, 2},
		{"all three expire", 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.FailoverTTL = 20 * time.Millisecond
			cfg.MaxPerSecond = 1e6 // the fleet must not lengthen the failover TTL
			expire, calls := recordingExpire(false)
			nodes := fleet(tt.nodes)
			timers := startTimers(t, cfg, expire, nil, nodes...)
			for _, id := range nodes[:tt.heartbit] {
				if _, err := timers.Reset(id); err != nil {
					t.Fatalf("Reset(%s): %v", id, err)
				}
			}
			for range tt.nodes - tt.heartbit {
				nextCall(t, calls)
			}
			if s := timers.Stats(); s.Throttled || s.ThrottleEngagements != 0 {
				t.Fatalf("stats %+v: a small fleet engaged the guard", s)
			}
		})
	}
}
