package broker

import (
	"context"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestNackDelay(t *testing.T) {
	cfg := DefaultConfig()
	tests := []struct {
		deliveries int
		want       time.Duration
	}{
		{0, 0},
		{1, time.Second},
		{2, 20 * time.Second},
		{3, 40 * time.Second},
	}
	for _, tt := range tests {
		if got := cfg.nackDelay(tt.deliveries); got != tt.want {
			t.Errorf("nackDelay(%d) = %s, want %s", tt.deliveries, got, tt.want)
		}
	}
}

func TestNackTimeoutRedelivers(t *testing.T) {
	cfg := fastConfig()
	cfg.NackTimeout = 30 * time.Millisecond
	b := newBroker(t, cfg)
	b.Enqueue(ev("e", "j", 50))

	_, oldToken := mustDequeue(t, b)
	// Nobody acks: the timer takes it back and it is delivered again.
	got, newToken := mustDequeue(t, b)
	if got.GetId() != "e" || newToken == oldToken {
		t.Fatalf("redelivery = %s/%s, want e under a new token", got.GetId(), newToken)
	}
	wantErr(t, "ack under the expired token", b.Ack("e", oldToken), ErrNackTimeoutReached)
	wantErr(t, "reset under the expired token", b.OutstandingReset("e", oldToken), ErrNackTimeoutReached)
	mustAck(t, b, "e", newToken)
}

func TestNackDelaysGrow(t *testing.T) {
	cfg := fastConfig()
	cfg.InitialNackDelay = 20 * time.Millisecond
	cfg.SubsequentNackDelay = 80 * time.Millisecond
	cfg.DeliveryLimit = 10
	b := newBroker(t, cfg)
	b.Enqueue(ev("e", "j", 50))
	b.Enqueue(ev("other", "j", 50)) // waits behind e the whole time

	_, token := mustDequeue(t, b)
	var waited []time.Duration
	for range 3 {
		mustNack(t, b, "e", token)
		if s := b.Stats(); s.Delayed != 1 || s.Ready != 0 || s.Pending != 1 {
			t.Fatalf("after nack: %+v, want e delayed and other pending", s)
		}
		start := time.Now()
		var got *droverv1.Evaluation
		got, token = mustDequeue(t, b)
		waited = append(waited, time.Since(start))
		if got.GetId() != "e" {
			t.Fatalf("redelivered %s, want e: the job stays serialized", got.GetId())
		}
	}
	// Timers never fire early: each redelivery waited at least its delay
	// (20ms, 80ms, 160ms), so the waits grow.
	for i, least := range []time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond} {
		if waited[i] < least {
			t.Fatalf("redelivery %d after %s, want at least %s", i+1, waited[i], least)
		}
	}
	mustAck(t, b, "e", token)
	if got, _ := mustDequeue(t, b); got.GetId() != "other" {
		t.Fatalf("after ack: %s, want other", got.GetId())
	}
}

func TestDeliveryLimitGoesToFailedQueue(t *testing.T) {
	cfg := fastConfig()
	cfg.DeliveryLimit = 2
	b := newBroker(t, cfg)
	b.Enqueue(ev("e", "j", 50))
	b.Enqueue(ev("next", "j", 50))

	for range cfg.DeliveryLimit {
		_, token := mustDequeue(t, b)
		mustNack(t, b, "e", token)
	}
	if s := b.Stats(); s.Failed != 1 || s.Ready != 0 || s.Pending != 1 {
		t.Fatalf("stats %+v, want 1 failed, 1 pending", s)
	}
	mustBeEmpty(t, b)

	failed, token, err := b.DequeueFailed(context.Background(), testWait)
	if err != nil || failed.GetId() != "e" {
		t.Fatalf("DequeueFailed = %v, %v; want e", failed.GetId(), err)
	}
	// A nack from the failed queue sends it back there.
	mustNack(t, b, "e", token)
	failed, token, err = b.DequeueFailed(context.Background(), testWait)
	if err != nil || failed.GetId() != "e" {
		t.Fatalf("DequeueFailed again = %v, %v; want e", failed.GetId(), err)
	}
	mustBeEmpty(t, b) // job still serialized behind the failed eval
	mustAck(t, b, "e", token)
	if got, _ := mustDequeue(t, b); got.GetId() != "next" {
		t.Fatalf("after failed ack: %s, want next", got.GetId())
	}
}

func TestWaitUntil(t *testing.T) {
	b := newBroker(t, fastConfig())
	now := time.Now()
	later := now.Add(150 * time.Millisecond)
	sooner := now.Add(60 * time.Millisecond)
	b.Enqueue(ev("later", "j1", 90, waitUntil(later)))
	b.Enqueue(ev("sooner", "j2", 10, waitUntil(sooner)))
	b.Enqueue(ev("past", "j3", 10, waitUntil(now.Add(-time.Second))))

	if s := b.Stats(); s.Delayed != 2 || s.Ready != 1 {
		t.Fatalf("stats %+v, want 2 delayed, 1 ready", s)
	}
	if got, _ := mustDequeue(t, b); got.GetId() != "past" {
		t.Fatalf("first = %s, want past", got.GetId())
	}
	for _, want := range []struct {
		id string
		at time.Time
	}{{"sooner", sooner}, {"later", later}} {
		got, _ := mustDequeue(t, b)
		if got.GetId() != want.id {
			t.Fatalf("got %s, want %s", got.GetId(), want.id)
		}
		if time.Now().Before(want.at) {
			t.Fatalf("%s delivered before its wait_until", want.id)
		}
	}
}

func TestWaitUntilQueuesBehindItsJob(t *testing.T) {
	b := newBroker(t, fastConfig())
	b.Enqueue(ev("cur", "j", 50))
	_, token := mustDequeue(t, b)
	b.Enqueue(ev("due", "j", 50, waitUntil(time.Now().Add(20*time.Millisecond))))
	waitFor(t, "delayed eval to become pending", func() bool { return b.Stats().Pending == 1 })
	mustBeEmpty(t, b)
	mustAck(t, b, "cur", token)
	if got, _ := mustDequeue(t, b); got.GetId() != "due" {
		t.Fatalf("got %s, want due", got.GetId())
	}
}

func TestTokenErrors(t *testing.T) {
	b := newBroker(t, fastConfig())
	b.Enqueue(ev("out", "j1", 50))
	_, token := mustDequeue(t, b)
	b.Enqueue(ev("ready", "j2", 50))

	ops := map[string]func(id, token string) error{
		"ack":    b.Ack,
		"nack":   b.Nack,
		"reset":  b.OutstandingReset,
		"pause":  b.PauseNackTimeout,
		"resume": b.ResumeNackTimeout,
	}
	tests := []struct {
		name  string
		id    string
		token string
		want  error
	}{
		{"unknown eval", "nope", token, ErrNotFound},
		{"wrong token", "out", "not-the-token", ErrTokenMismatch},
		{"known but not outstanding", "ready", token, ErrNotOutstanding},
	}
	for _, tt := range tests {
		for op, f := range ops {
			wantErr(t, tt.name+" "+op, f(tt.id, tt.token), tt.want)
		}
	}
	if got, ok := b.Outstanding("out"); !ok || got != token {
		t.Fatalf("Outstanding(out) = %q, %v; want %q", got, ok, token)
	}
	if _, ok := b.Outstanding("ready"); ok {
		t.Fatal("Outstanding(ready) = true")
	}
	mustAck(t, b, "out", token)
	wantErr(t, "second ack", b.Ack("out", token), ErrNotFound)

	b.SetEnabled(false)
	for op, f := range ops {
		wantErr(t, "disabled "+op, f("ready", token), ErrDisabled)
	}
}

func TestPauseAndResumeNackTimeout(t *testing.T) {
	cfg := fastConfig()
	cfg.NackTimeout = 30 * time.Millisecond
	b := newBroker(t, cfg)
	b.Enqueue(ev("e", "j", 50))
	_, token := mustDequeue(t, b)

	if err := b.PauseNackTimeout("e", token); err != nil {
		t.Fatal(err)
	}
	// Paused: several timeouts pass without redelivery.
	got, _, err := b.Dequeue(context.Background(), []droverv1.JobType{service}, 4*cfg.NackTimeout)
	if err != nil || got != nil {
		t.Fatalf("while paused: got %v, %v; want nothing", got.GetId(), err)
	}
	if err := b.OutstandingReset("e", token); err != nil {
		t.Fatalf("reset while paused: %v", err)
	}
	if _, ok := b.Outstanding("e"); !ok {
		t.Fatal("paused eval no longer outstanding")
	}
	if err := b.ResumeNackTimeout("e", token); err != nil {
		t.Fatal(err)
	}
	if err := b.OutstandingReset("e", token); err != nil {
		t.Fatalf("reset: %v", err)
	}
	// Resumed: the timer runs again and takes it back.
	if got, _ := mustDequeue(t, b); got.GetId() != "e" {
		t.Fatalf("got %s, want e", got.GetId())
	}
	wantErr(t, "ack after expiry", b.Ack("e", token), ErrNackTimeoutReached)
}
