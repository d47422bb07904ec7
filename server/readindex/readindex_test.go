package readindex

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fakeRaft counts rounds. Each VerifyLeader blocks until the test releases
// it, so the test decides which reads arrive during a round.
type fakeRaft struct {
	mu       sync.Mutex
	commit   uint64
	verifies int
	barriers int
	release  chan error // one value per round
	started  chan struct{}
}

type future struct{ err error }

func (f future) Error() error { return f.err }

func (r *fakeRaft) CommitIndex() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commit
}

func (r *fakeRaft) setCommit(i uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commit = i
}

func (r *fakeRaft) VerifyLeader() raft.Future {
	r.mu.Lock()
	r.verifies++
	r.mu.Unlock()
	r.started <- struct{}{}
	return future{<-r.release}
}

func (r *fakeRaft) Barrier(time.Duration) raft.Future {
	r.mu.Lock()
	r.barriers++
	r.mu.Unlock()
	r.started <- struct{}{}
	return future{<-r.release}
}

func (r *fakeRaft) counts() (verifies, barriers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.verifies, r.barriers
}

// fakeState is a state whose applied index the test moves.
type fakeState struct {
	mu      sync.Mutex
	applied uint64
	changed chan struct{}
}

func newFakeState(applied uint64) *fakeState {
	return &fakeState{applied: applied, changed: make(chan struct{})}
}

func (s *fakeState) LatestIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

func (s *fakeState) apply(i uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = i
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *fakeState) WaitIndex(ctx context.Context, i uint64) error {
	for {
		s.mu.Lock()
		applied, ch := s.applied, s.changed
		s.mu.Unlock()
		if applied >= i {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func newConfirmer(r *fakeRaft, st State, log Log) *Confirmer {
	if log == nil {
		log = func(uint64) (raft.LogType, bool, error) { return raft.LogCommand, true, nil }
	}
	return New(Config{Raft: r, State: st, Log: log})
}

func newFakeRaft(commit uint64) *fakeRaft {
	return &fakeRaft{commit: commit, release: make(chan error), started: make(chan struct{})}
}

// confirmAsync runs Confirm in a goroutine and returns its result channel.
func confirmAsync(ctx context.Context, c *Confirmer) <-chan error {
	out := make(chan error, 1)
	go func() { out <- c.Confirm(ctx) }()
	return out
}

func TestConcurrentReadsShareTheNextRound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := newFakeRaft(5)
	c := newConfirmer(r, newFakeState(5), nil)

	first := confirmAsync(ctx, c)
	<-r.started // round 1 runs; it began before the reads below were made
	var later []<-chan error
	for range 50 {
		later = append(later, confirmAsync(ctx, c))
	}
	waitJoined(t, c, 50)
	r.release <- nil
	if err := <-first; err != nil {
		t.Fatalf("first read: %v", err)
	}
	for i, ch := range later {
		select {
		case err := <-ch:
			t.Fatalf("read %d answered by a round that began before it (err %v)", i, err)
		default:
		}
	}
	<-r.started // round 2, shared by the 50
	r.release <- nil
	for i, ch := range later {
		if err := <-ch; err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if v, _ := r.counts(); v != 2 {
		t.Fatalf("%d verify rounds for 51 reads, want 2", v)
	}
}

// waitJoined waits until n reads wait for the round that has not started.
func waitJoined(t *testing.T, c *Confirmer, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		joined := c.rounds.Waiting()
		if joined == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reads joined the next round, want %d", joined, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFailedConfirmationFailsEveryReadOfTheRound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := newFakeRaft(5)
	c := newConfirmer(r, newFakeState(5), nil)
	a := confirmAsync(ctx, c)
	<-r.started
	r.release <- raft.ErrNotLeader
	if err := <-a; !errors.Is(err, ErrNotLeader) || !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("got %v, want ErrNotLeader wrapping raft's error", err)
	}
}

func TestReadWaitsForTheCommitIndexOfItsRound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := newFakeRaft(9)
	st := newFakeState(7)
	c := newConfirmer(r, st, nil)
	done := confirmAsync(ctx, c)
	<-r.started
	r.setCommit(12) // committed after the round began: not waited for
	r.release <- nil
	select {
	case err := <-done:
		t.Fatalf("answered at applied index 7 with commit index 9 (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	st.apply(8)
	select {
	case err := <-done:
		t.Fatalf("answered at applied index 8 with commit index 9 (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	st.apply(9)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestReadWaitsOnlyForCommandsTheStateSees(t *testing.T) {
	// Entries 8 and 9 are raft's own (a new leader's no-op, a barrier): the
	// state never sees them, so the read waits for command 7 only.
	types := map[uint64]raft.LogType{7: raft.LogCommand, 8: raft.LogNoop, 9: raft.LogBarrier}
	log := func(i uint64) (raft.LogType, bool, error) {
		t, ok := types[i]
		return t, ok, nil
	}
	cases := []struct {
		name    string
		applied uint64
		log     Log
		wantErr bool
	}{
		{"caught up with the last command", 7, log, false},
		{"compacted into a snapshot", 5, func(uint64) (raft.LogType, bool, error) { return 0, false, nil }, false},
		{"log read fails", 5, func(uint64) (raft.LogType, bool, error) { return 0, false, errors.New("disk") }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r := newFakeRaft(9)
			c := newConfirmer(r, newFakeState(tc.applied), tc.log)
			done := confirmAsync(ctx, c)
			<-r.started
			r.release <- nil
			if err := <-done; (err != nil) != tc.wantErr {
				t.Fatalf("got %v, want error %v", err, tc.wantErr)
			}
		})
	}
	t.Run("a command not yet applied is waited for", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		r := newFakeRaft(9)
		c := newConfirmer(r, newFakeState(6), log)
		done := confirmAsync(ctx, c)
		<-r.started
		r.release <- nil
		if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the wait for command 7 to run into the deadline", err)
		}
	})
}

func TestRoundsAfterAStallConfirmThroughTheLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := newFakeRaft(3)
	d := NewStallDetector(10*time.Millisecond, 100*time.Millisecond, time.Second)
	d.observe(d.now() + int64(time.Second)) // a tick a second late: a stall just ended
	c := New(Config{Raft: r, State: newFakeState(3), Stalls: d,
		Log: func(uint64) (raft.LogType, bool, error) { return raft.LogCommand, true, nil }})
	done := confirmAsync(ctx, c)
	<-r.started
	r.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, b := r.counts(); v != 0 || b != 1 {
		t.Fatalf("verifies %d barriers %d after a stall, want 0 and 1", v, b)
	}
}

// every10ms lists tick offsets in milliseconds from from to to.
func every10ms(from, to time.Duration) []time.Duration {
	var out []time.Duration
	for at := from; at <= to; at += 10 {
		out = append(out, at)
	}
	return out
}

func TestStallDetector(t *testing.T) {
	tick, threshold, window := 10*time.Millisecond, 100*time.Millisecond, time.Second
	cases := []struct {
		name string
		// ticks are offsets of observed ticks; now is when Recent is asked.
		ticks []time.Duration
		now   time.Duration
		want  bool
	}{
		{"regular ticks", []time.Duration{10, 20, 30}, 35, false},
		{"a late tick marks a stall", []time.Duration{10, 500}, 505, true},
		{"the stall is forgotten after the window", append([]time.Duration{10}, every10ms(500, 1510)...), 1505, false},
		{"but remembered within it", append([]time.Duration{10}, every10ms(500, 1490)...), 1495, true},
		{"an unseen stall: no tick for a while", []time.Duration{10}, 300, true},
		{"a tick just over the threshold", []time.Duration{10, 10 + 111}, 125, true},
		{"a tick just under it", []time.Duration{10, 10 + 109}, 125, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &StallDetector{tick: tick, threshold: threshold, window: window}
			for _, at := range tc.ticks {
				d.observe(int64(at * time.Millisecond))
			}
			if got := d.recentAt(int64(tc.now * time.Millisecond)); got != tc.want {
				t.Fatalf("Recent = %v, want %v", got, tc.want)
			}
		})
	}
}
