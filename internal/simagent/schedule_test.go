package simagent

import (
	"context"
	"sync"
	"testing"
	"time"
)

func newSlot() *slot { return &slot{index: -1} }

func TestScheduleKeepsTheEarliestRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running bool
		asks    []int64
		// wantDue is the slot's due time after the asks (queued), or the
		// time of the run asked for meanwhile (running).
		wantDue int64
	}{
		{name: "queued once", asks: []int64{50}, wantDue: 50},
		{name: "queued earlier", asks: []int64{50, 20}, wantDue: 20},
		{name: "queued later is ignored", asks: []int64{20, 50}, wantDue: 20},
		{name: "asked while running", running: true, asks: []int64{50, 30, 40}, wantDue: 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newSchedule(nil, 1)
			s := newSlot()
			s.running = tc.running
			for _, due := range tc.asks {
				q.at(s, due)
			}
			if tc.running {
				if !s.again || s.againDue != tc.wantDue || s.index != -1 {
					t.Fatalf("again %v at %d (index %d), want a run at %d after this one", s.again, s.againDue, s.index, tc.wantDue)
				}
				return
			}
			if len(q.heap) != 1 || s.due != tc.wantDue {
				t.Fatalf("%d queued, due %d; want 1 at %d", len(q.heap), s.due, tc.wantDue)
			}
		})
	}
}

func TestScheduleFinish(t *testing.T) {
	for _, tc := range []struct {
		name     string
		again    int64 // 0: no run asked for meanwhile
		next     int64
		ok       bool
		want     int64
		wantNone bool
	}{
		{name: "done", wantNone: true},
		{name: "next run", next: 70, ok: true, want: 70},
		{name: "asked for meanwhile", again: 40, want: 40},
		{name: "asked for earlier than next", again: 40, next: 70, ok: true, want: 40},
		{name: "next earlier than asked", again: 90, next: 70, ok: true, want: 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newSchedule(nil, 1)
			s := newSlot()
			s.running = true
			if tc.again != 0 {
				q.at(s, tc.again)
			}
			q.finish(s, tc.next, tc.ok)
			if s.running || s.again {
				t.Fatalf("slot still running %v / again %v", s.running, s.again)
			}
			if tc.wantNone {
				if len(q.heap) != 0 {
					t.Fatalf("queued at %d, want nothing", s.due)
				}
				return
			}
			if len(q.heap) != 1 || s.due != tc.want {
				t.Fatalf("%d queued, due %d; want 1 at %d", len(q.heap), s.due, tc.want)
			}
		})
	}
}

func TestScheduleNextPopsInOrder(t *testing.T) {
	q := newSchedule(nil, 1)
	slots := []*slot{newSlot(), newSlot(), newSlot()}
	for i, due := range []int64{30, 10, 20} {
		q.at(slots[i], due)
	}
	if s, wait := q.next(5); s != nil || wait != 5 {
		t.Fatalf("at 5: got a slot or wait %s, want to wait 5ns", wait)
	}
	var got []int64
	for {
		s, _ := q.next(100)
		if s == nil {
			break
		}
		if !s.running {
			t.Error("popped slot is not marked running")
		}
		got = append(got, s.due)
	}
	if len(got) != 3 || got[0] != 10 || got[1] != 20 || got[2] != 30 {
		t.Fatalf("popped %v, want [10 20 30]", got)
	}
}

// TestScheduleLoopRunsTasksOnce runs tasks through the dispatching loop:
// each runs when due, a task that asks to run again does, and no more than
// maxInFlight run at once.
func TestScheduleLoopRunsTasksOnce(t *testing.T) {
	const tasks, maxInFlight = 50, 4
	var (
		mu       sync.Mutex
		runs     = make(map[*slot]int)
		inFlight int
		peak     int
	)
	done := make(chan struct{})
	var q *schedule
	q = newSchedule(func(_ context.Context, s *slot) (int64, bool) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		runs[s]++
		n, total := runs[s], 0
		for _, r := range runs {
			total += r
		}
		mu.Unlock()
		time.Sleep(time.Millisecond) // work, so that runs overlap
		mu.Lock()
		inFlight--
		mu.Unlock()
		if total == 2*tasks {
			close(done)
		}
		// Every task runs twice: once now, once a little later.
		return time.Now().Add(time.Millisecond).UnixNano(), n < 2
	}, maxInFlight)
	ctx, cancel := context.WithCancel(t.Context())
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		q.loop(ctx)
	}()
	now := time.Now().UnixNano()
	for range tasks {
		q.at(newSlot(), now)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("tasks did not all run twice within 10s")
	}
	cancel()
	<-loopDone
	mu.Lock()
	defer mu.Unlock()
	for _, n := range runs {
		if n != 2 {
			t.Errorf("a slot ran %d times, want 2", n)
		}
	}
	if peak > maxInFlight {
		t.Errorf("%d tasks ran at once, want at most %d", peak, maxInFlight)
	}
}
