package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestResetKeepsNodeAliveAndMissedNodeExpires(t *testing.T) {
	cfg := quietConfig()
	expire, calls := recordingExpire(false)
	timers := startTimers(t, cfg, expire, nil)

	heartbeats := time.NewTicker(10 * time.Millisecond)
	defer heartbeats.Stop()
	stopAt := time.Now().Add(300 * time.Millisecond)
	var lastReset time.Time
	var lastTTL time.Duration
	for time.Now().Before(stopAt) {
		<-heartbeats.C
		lastReset = time.Now()
		ttl, err := timers.Reset("n1")
		if err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if ttl < cfg.MinTTL || ttl >= 2*cfg.MinTTL {
			t.Fatalf("Reset returned %s, want in [%s, %s)", ttl, cfg.MinTTL, 2*cfg.MinTTL)
		}
		lastTTL = ttl
		select {
		case c := <-calls:
			t.Fatalf("node %s expired while heartbeating", c.id)
		default:
		}
	}

	c := nextCall(t, calls)
	if c.id != "n1" {
		t.Fatalf("expired node %s, want n1", c.id)
	}
	if waited := c.at.Sub(lastReset); waited < lastTTL+cfg.Grace {
		t.Fatalf("expired %s after the last heartbeat, before ttl %s + grace %s", waited, lastTTL, cfg.Grace)
	}
	eventually(t, "the down node to be forgotten", func() bool { return timers.Stats().Tracked == 0 })
	if s := timers.Stats(); s.Expired != 1 || s.Marked != 1 {
		t.Fatalf("stats %+v, want 1 expired and 1 marked", s)
	}
}

func TestResetTTLCountsTrackedNodes(t *testing.T) {
	cfg := Config{MinTTL: time.Millisecond, MaxPerSecond: 10, Grace: time.Second, FailoverTTL: 10 * time.Second}
	expire, _ := recordingExpire(false)
	timers := startTimers(t, cfg, expire, nil, "a", "b", "c", "d", "e")

	ttl, err := timers.Reset("a")
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	// Five tracked nodes at 10 heartbeats a second: base 500ms.
	if ttl < 500*time.Millisecond || ttl >= time.Second {
		t.Fatalf("Reset returned %s, want in [500ms, 1s)", ttl)
	}
}

func TestStartGivesFailoverTTL(t *testing.T) {
	cfg := quietConfig()
	// TTLs of at most 40ms: the flat failover TTL covers them.
	cfg.MinTTL, cfg.Grace = 20*time.Millisecond, 5*time.Second
	cfg.FailoverTTL = 50 * time.Millisecond
	expire, calls := recordingExpire(false)

	nodes := make([]string, 20)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("n%d", i)
	}
	started := time.Now()
	startTimers(t, cfg, expire, nil, nodes...)

	seen := map[string]bool{}
	for range nodes {
		c := nextCall(t, calls)
		if early := c.at.Sub(started); early < cfg.FailoverTTL {
			t.Fatalf("node %s expired %s after Start, before the failover TTL", c.id, early)
		}
		if late := c.at.Sub(started); late >= cfg.Grace {
			t.Fatalf("node %s expired %s after Start: the failover TTL got a grace or stagger", c.id, late)
		}
		seen[c.id] = true
	}
	if len(seen) != len(nodes) {
		t.Fatalf("expired %d distinct nodes, want %d", len(seen), len(nodes))
	}
}

func TestResetWhenNotLeader(t *testing.T) {
	expire, _ := recordingExpire(false)
	timers := NewTimers(quietConfig(), expire, nil)
	if _, err := timers.Reset("n1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Reset before Start = %v, want ErrNotLeader", err)
	}
	if err := timers.Start(t.Context(), []string{"n1"}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := timers.Reset("n1"); err != nil {
		t.Fatalf("Reset after Start: %v", err)
	}
	timers.Stop()
	if _, err := timers.Reset("n1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Reset after Stop = %v, want ErrNotLeader", err)
	}
	if s := timers.Stats(); s.Tracked != 0 || s.Pending != 0 {
		t.Fatalf("stats after Stop %+v, want nothing tracked", s)
	}
}

func TestStartTwiceFailsAndRestartWorks(t *testing.T) {
	expire, _ := recordingExpire(false)
	timers := startTimers(t, quietConfig(), expire, nil)
	if err := timers.Start(t.Context(), nil); err == nil {
		t.Fatal("second Start succeeded")
	}
	timers.Stop()
	if err := timers.Start(t.Context(), []string{"n1"}); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	if s := timers.Stats(); s.Tracked != 1 {
		t.Fatalf("tracked %d after restart, want 1", s.Tracked)
	}
}

func TestStartRejectsInvalidConfig(t *testing.T) {
	cfg := quietConfig()
	cfg.Grace = -time.Second
	expire, _ := recordingExpire(false)
	if err := NewTimers(cfg, expire, nil).Start(t.Context(), nil); err == nil {
		t.Fatal("Start accepted a negative grace")
	}
}

func TestContextEndStopsTimers(t *testing.T) {
	expire, _ := recordingExpire(false)
	timers := NewTimers(quietConfig(), expire, nil)
	ctx, cancel := context.WithCancel(t.Context())
	if err := timers.Start(ctx, []string{"n1"}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	cancel()
	eventually(t, "Reset to fail once leadership ended", func() bool {
		_, err := timers.Reset("n1")
		return errors.Is(err, ErrNotLeader)
	})
	timers.Stop() // a no-op now, and must not block
}

func TestStopCancelsInFlightExpireAndWaits(t *testing.T) {
	cfg := quietConfig()
	cfg.FailoverTTL = 10 * time.Millisecond
	entered := make(chan struct{})
	returned := make(chan struct{})
	expire := func(ctx context.Context, _ string) bool {
		close(entered)
		<-ctx.Done()
		close(returned)
		return false
	}
	timers := NewTimers(cfg, expire, nil)
	if err := timers.Start(t.Context(), []string{"n1"}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	select {
	case <-entered:
	case <-time.After(testDeadline):
		t.Fatal("ExpireFunc not called")
	}

	stopped := make(chan struct{})
	go func() {
		timers.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(testDeadline):
		t.Fatal("Stop did not return")
	}
	select {
	case <-returned:
	default:
		t.Fatal("Stop returned before the in-flight ExpireFunc")
	}
}

func TestKeepTrackingRearms(t *testing.T) {
	cfg := quietConfig()
	cfg.MinTTL, cfg.Grace, cfg.FailoverTTL = 20*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond
	expire, calls := recordingExpire(true)
	timers := startTimers(t, cfg, expire, nil, "n1")

	first := nextCall(t, calls)
	second := nextCall(t, calls)
	if first.id != "n1" || second.id != "n1" {
		t.Fatalf("expired %s then %s, want n1 twice", first.id, second.id)
	}
	if gap := second.at.Sub(first.at); gap < cfg.MinTTL+cfg.Grace {
		t.Fatalf("re-armed timer fired after %s, want at least TTL %s + grace %s", gap, cfg.MinTTL, cfg.Grace)
	}
	if s := timers.Stats(); s.Tracked != 1 {
		t.Fatalf("tracked %d, want the disconnected node still tracked", s.Tracked)
	}
}
