package rounds

import (
	"context"
	"errors"
	"testing"
	"time"
)

// gated is an operation that blocks until the test releases it, counting
// runs, so the test decides which calls arrive during a round.
type gated struct {
	started chan int
	release chan error
	runs    int
}

func newGated() *gated { return &gated{started: make(chan int), release: make(chan error)} }

func (g *gated) run() (int, error) {
	g.runs++
	g.started <- g.runs
	return g.runs, <-g.release
}

func waitAsync(ctx context.Context, r *Rounds[int]) <-chan error {
	out := make(chan error, 1)
	go func() {
		_, err := r.Wait(ctx)
		out <- err
	}()
	return out
}

func waitWaiting(t *testing.T, r *Rounds[int], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait for the next round, want %d", r.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCallsDuringARoundShareTheNext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := newGated()
	r := New(g.run)
	first := waitAsync(ctx, r)
	<-g.started // round 1 runs; the calls below arrive after it began
	var later []<-chan error
	for range 20 {
		later = append(later, waitAsync(ctx, r))
	}
	waitWaiting(t, r, 20)
	g.release <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, ch := range later {
		select {
		case err := <-ch:
			t.Fatalf("call %d answered by a round that began before it (err %v)", i, err)
		default:
		}
	}
	if n := <-g.started; n != 2 {
		t.Fatalf("round %d started, want 2", n)
	}
	g.release <- nil
	for i, ch := range later {
		if err := <-ch; err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if g.runs != 2 {
		t.Fatalf("%d runs for 21 calls, want 2", g.runs)
	}
}

func TestRoundErrorReachesEveryCallOfIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := newGated()
	r := New(g.run)
	first := waitAsync(ctx, r)
	<-g.started
	a, b := waitAsync(ctx, r), waitAsync(ctx, r)
	waitWaiting(t, r, 2)
	g.release <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-g.started // round 2: a and b
	boom := errors.New("boom")
	g.release <- boom
	for _, ch := range []<-chan error{a, b} {
		if err := <-ch; !errors.Is(err, boom) {
			t.Fatalf("got %v, want the round's error", err)
		}
	}
}

func TestCallerGivesUpWhileTheRoundRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	g := newGated()
	r := New(g.run)
	done := waitAsync(ctx, r)
	<-g.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	g.release <- nil // the round still ends, for nobody
	bg, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	next := waitAsync(bg, r)
	<-g.started
	g.release <- nil
	if err := <-next; err != nil {
		t.Fatalf("a later call: %v", err)
	}
}
