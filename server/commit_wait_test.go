package server

import (
	"errors"
	"testing"
	"time"
)

// TestAwaitCommit: a write's wait ends with raft's answer, or early, with
// the outcome unknown, when the data dir is full or the server shuts down.
// raft never answers an entry still queued when it stops, so without the
// shutdown case a leader duty writing at that moment held the shutdown up
// for ever.
func TestAwaitCommit(t *testing.T) {
	errFull := errors.New("no space left on device")
	errRaft := errors.New("leadership lost")
	tests := []struct {
		name     string
		answer   error // sent as raft's answer when answered is set
		answered bool
		shutdown bool
		full     error // what fullErr reports once full has signalled
		signal   bool  // full has signalled
		fullless bool  // no full watch, as for a new leader's barrier
		want     error
	}{
		{name: "committed", answered: true, want: nil},
		{name: "raft's error", answered: true, answer: errRaft, want: errRaft},
		{name: "shutting down", shutdown: true, want: errStoppedWaiting},
		{name: "data dir full", signal: true, full: errFull, want: errStoppedWaiting},
		{name: "space freed again, then committed", signal: true, answered: true, want: nil},
		{name: "barrier: committed", fullless: true, answered: true, want: nil},
		{name: "barrier: shutting down", fullless: true, shutdown: true, want: errStoppedWaiting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answered := make(chan error, 1)
			shutdown := make(chan struct{})
			fullCh := make(chan struct{}, 1)
			if tt.signal {
				fullCh <- struct{}{}
			}
			fullErr := func() error {
				if tt.full == nil && tt.answered {
					answered <- tt.answer // answered once the full signal is seen through
				}
				return tt.full
			}
			if tt.answered && !tt.signal {
				answered <- tt.answer
			}
			if tt.shutdown {
				close(shutdown)
			}
			done := make(chan error, 1)
			full := func() <-chan struct{} { return fullCh }
			if tt.fullless {
				full, fullErr = nil, nil
			}
			go func() { done <- awaitCommit(answered, shutdown, full, fullErr, "s1") }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the wait did not end within 10s")
			}
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}
