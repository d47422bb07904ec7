package heartbeat

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// guardConfig fails a whole fleet at once (a short failover TTL, which
// covers TTLs of at most 40ms) while nodes that heartbeat get a timer, TTL
// plus the long grace, far beyond the test.
func guardConfig() Config {
	return Config{
		MinTTL: 20 * time.Millisecond,
		// So high that the fleet never lengthens TTLs or the failover TTL.
		MaxPerSecond:        1e6,
		Grace:               10 * time.Second,
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
	// With a 20ms base TTL and a 300ms window, a silent fleet of 30 would
	// expire within the window, so a third of the tracked fleet decides,
	// and never less than the floor of 5.
	if tracked > 30 || missed < 5 || missed < (tracked+2)/3 {
		t.Fatalf("warning says %d missed of %d tracked, want at least a third and the floor of 5", missed, tracked)
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
			// TTLs of at most 10ms, so the failover TTL stays flat.
			cfg.MinTTL, cfg.FailoverTTL = 5*time.Millisecond, 20*time.Millisecond
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

// recheckConfig gives a disconnected node a re-check every 30 to 50ms and
// keeps every expiry within the guard's window for the whole test, at a
// throttled rate of one node per 100s: a re-check that waited for a token,
// or counted towards the guard, would show within a few re-checks.
func recheckConfig() Config {
	return Config{
		MinTTL:              20 * time.Millisecond,
		MaxPerSecond:        1e6, // the fleet must not lengthen any TTL
		Grace:               10 * time.Millisecond,
		FailoverTTL:         30 * time.Millisecond,
		MassFailureFraction: 1.0 / 3,
		MassFailureWindow:   time.Minute,
		MassFailureMinNodes: 3,
		ThrottledMarkRate:   0.01,
	}
}

// disconnectedExpire keeps the nodes named d* tracked, as the server does
// for a disconnected node, and lets every other node go.
func disconnectedExpire() (ExpireFunc, <-chan call) {
	calls := make(chan call, 1024)
	return func(_ context.Context, id string) bool {
		calls <- call{id: id, at: time.Now()}
		return strings.HasPrefix(id, "d")
	}, calls
}

// nextCallOf waits for the next ExpireFunc call for id, skipping others.
func nextCallOf(t *testing.T, calls <-chan call, id string) {
	t.Helper()
	for {
		if nextCall(t, calls).id == id {
			return
		}
	}
}

// failOneByOne tracks each of ids in turn and waits until it missed its
// heartbeat and was marked, so that each expiry is counted, and marked,
// before the next: the guard engages at a known expiry.
func failOneByOne(t *testing.T, timers *Timers, calls <-chan call, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := timers.Reset(id); err != nil {
			t.Fatalf("Reset(%s): %v", id, err)
		}
		nextCallOf(t, calls, id)
	}
}

// TestRechecksNeitherEngageGuardNorSpendTokens checks that the re-checks of
// a node kept tracked count neither towards the mass-failure guard nor
// against its throttle, before and while the guard is engaged.
func TestRechecksNeitherEngageGuardNorSpendTokens(t *testing.T) {
	expire, calls := disconnectedExpire()
	timers := startTimers(t, recheckConfig(), expire, nil, "d1")

	// The first expiry is news: the one expiry in the window, below the
	// guard's floor of 3. Five re-checks would make it 6.
	for range 6 {
		nextCallOf(t, calls, "d1")
	}
	if s := timers.Stats(); s.Throttled || s.ThrottleEngagements != 0 {
		t.Fatalf("stats %+v: re-checks engaged the guard", s)
	}

	// Two nodes that really fail make three expiries in the window: the
	// guard engages at f2, which spends the limiter's one spare token.
	failOneByOne(t, timers, calls, "f1", "f2")
	if s := timers.Stats(); !s.Throttled || s.ThrottleEngagements != 1 {
		t.Fatalf("stats %+v, want the guard engaged by the failed nodes", s)
	}
	tokens := timers.limiter.Tokens()

	// The throttle now grants a token per 100s: re-checks that waited for
	// one would stall here, and re-checks that took one would leave fewer.
	for range 5 {
		nextCallOf(t, calls, "d1")
	}
	if s := timers.Stats(); !s.Throttled || s.ThrottleEngagements != 1 {
		t.Fatalf("stats %+v, want the guard still engaged, once", s)
	}
	if left := timers.limiter.Tokens(); left < tokens {
		t.Fatalf("throttle tokens %g after re-checks, want at least the %g before", left, tokens)
	}
}

// TestRecheckYieldsThrottledWait checks that a re-check queued while the
// marker waits for a token to mark a failed node is taken at once.
func TestRecheckYieldsThrottledWait(t *testing.T) {
	expire, calls := disconnectedExpire()
	timers := startTimers(t, recheckConfig(), expire, nil, "d1")
	nextCallOf(t, calls, "d1")

	// f2 engages the guard and spends the spare token; f3 then waits 100s
	// for the next.
	failOneByOne(t, timers, calls, "f1", "f2")
	if _, err := timers.Reset("f3"); err != nil {
		t.Fatalf("Reset(f3): %v", err)
	}
	eventually(t, "f3 to wait for a token", func() bool {
		timers.mu.Lock()
		defer timers.mu.Unlock()
		return timers.guard.engaged && timers.pending.len() == 1
	})
	for range 3 {
		nextCallOf(t, calls, "d1")
	}
	if s := timers.Stats(); s.Marked < 6 || s.Tracked != 2 {
		t.Fatalf("stats %+v, want f3 still waiting while d1 is re-checked", s)
	}
}

// TestResetEndsRechecks checks that a kept node which heartbeats again has
// its next expiry count towards the guard: it is news again.
func TestResetEndsRechecks(t *testing.T) {
	cfg := recheckConfig()
	cfg.MassFailureMinNodes = 2
	expire, calls := disconnectedExpire()
	timers := startTimers(t, cfg, expire, nil, "d1")
	nextCallOf(t, calls, "d1")
	eventually(t, "d1 to be re-armed for re-checks", func() bool {
		timers.mu.Lock()
		defer timers.mu.Unlock()
		e := timers.nodes["d1"]
		return e != nil && e.state == armed && e.recheck
	})

	if _, err := timers.Reset("d1"); err != nil {
		t.Fatalf("Reset(d1): %v", err)
	}
	// d1's first expiry and this one make the floor of 2.
	eventually(t, "the guard to engage", func() bool { return timers.Stats().Throttled })
}
