package events

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestPublishIgnoresEmptyAndNonIncreasing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBroker(Config{})
		if got := b.LastIndex(); got != 0 {
			t.Fatalf("LastIndex of a new broker = %d, want 0", got)
		}
		s := mustSubscribe(t, b, SubscribeRequest{})

		b.Publish(5, nil)
		b.Publish(5, []*droverv1.Event{})
		if got := b.LastIndex(); got != 0 {
			t.Fatalf("LastIndex after empty publishes = %d, want 0", got)
		}
		publishEach(b, 5, 5, 3, 0, 7)
		if got := b.LastIndex(); got != 7 {
			t.Fatalf("LastIndex = %d, want 7", got)
		}
		if batches, events := b.held(); batches != 2 || events != 2 {
			t.Fatalf("held = %d batches, %d events; want 2, 2", batches, events)
		}
		assertIndexes(t, readIndexes(t, s, 2, false), []uint64{5, 7})
		expectNoBatch(t, s)
	})
}

func TestPublishSharesEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBroker(Config{})
		s1 := mustSubscribe(t, b, SubscribeRequest{})
		s2 := mustSubscribe(t, b, SubscribeRequest{})
		events := nodeEvents(1, 3)
		b.Publish(1, events)

		b1, b2 := next(t, s1), next(t, s2)
		for i := range events {
			if b1.Events[i] != events[i] || b2.Events[i] != events[i] {
				t.Fatalf("event %d was copied; subscribers must get the published pointers", i)
			}
		}
		// The shared slice is clipped, so an append by one subscriber
		// cannot show up in what another reads.
		_ = append(b1.Events, ev(droverv1.Topic_TOPIC_JOB, "intruder", 1))
		if cap(b2.Events) != len(b2.Events) || !slices.Equal(b2.Events, events) {
			t.Fatalf("subscriber batch not clipped or modified: len %d cap %d", len(b2.Events), cap(b2.Events))
		}
	})
}

func TestBufferStaysBounded(t *testing.T) {
	const maxEvents = 100
	b := NewBroker(Config{MaxEvents: maxEvents})
	for i := uint64(1); i <= 5000; i++ {
		size := int(i%13) + 1 // batches of 1..13 events
		b.Publish(i, nodeEvents(i, size))
		batches, events := b.held()
		if events > maxEvents {
			t.Fatalf("after index %d: %d events held, bound is %d", i, events, maxEvents)
		}
		if batches < 1 || events < size {
			t.Fatalf("after index %d: %d batches, %d events held; the newest batch (%d events) must be held", i, batches, events, size)
		}
	}
	// A batch bigger than the bound is held alone so it can still be read.
	b.Publish(6000, nodeEvents(6000, maxEvents+1))
	if batches, events := b.held(); batches != 1 || events != maxEvents+1 {
		t.Fatalf("oversized batch: held %d batches, %d events; want 1, %d", batches, events, maxEvents+1)
	}
	b.Publish(6001, nodeEvents(6001, 1))
	if batches, events := b.held(); batches != 1 || events != 1 {
		t.Fatalf("after oversized batch: held %d batches, %d events; want 1, 1", batches, events)
	}
}

func TestDefaultMaxEvents(t *testing.T) {
	b := NewBroker(Config{})
	for i := uint64(1); i <= defaultMaxEvents+10; i++ {
		b.Publish(i, nodeEvents(i, 1))
	}
	if _, events := b.held(); events != defaultMaxEvents {
		t.Fatalf("held %d events, want the default bound %d", events, defaultMaxEvents)
	}
}

func TestPurgeEndsSubscriptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBroker(Config{})
		publishEach(b, 1, 2, 3)

		waiting := mustSubscribe(t, b, SubscribeRequest{}) // caught up, blocked in Next
		behind := mustSubscribe(t, b, SubscribeRequest{FromIndex: 1})
		errc := make(chan error, 1)
		go func() { _, err := waiting.Next(t.Context()); errc <- err }()
		synctest.Wait() // waiting is durably blocked in Next

		b.Purge()
		if err := <-errc; !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("blocked Next after Purge: %v, want ErrSubscriptionClosed", err)
		}
		// Unread batches are dropped too: the subscriber must resubscribe.
		if err := nextErr(t, behind); !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("Next with unread batches after Purge: %v, want ErrSubscriptionClosed", err)
		}
		if batches, events := b.held(); batches != 0 || events != 0 {
			t.Fatalf("held after Purge = %d batches, %d events; want none", batches, events)
		}
		if got := b.LastIndex(); got != 3 {
			t.Fatalf("LastIndex after Purge = %d, want 3 (kept)", got)
		}

		// Resubscribing from a purged index reports the gap; indexes stay
		// increasing across the purge.
		resumed := mustSubscribe(t, b, SubscribeRequest{FromIndex: 3})
		fresh := mustSubscribe(t, b, SubscribeRequest{})
		publishEach(b, 2, 10)
		assertIndexes(t, readIndexes(t, resumed, 1, true), []uint64{10})
		assertIndexes(t, readIndexes(t, fresh, 1, false), []uint64{10})
	})
}

func TestBrokerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBroker(Config{})
		s := mustSubscribe(t, b, SubscribeRequest{})
		errc := make(chan error, 1)
		go func() { _, err := s.Next(t.Context()); errc <- err }()
		synctest.Wait()

		b.Close()
		if err := <-errc; !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("blocked Next after Close: %v, want ErrSubscriptionClosed", err)
		}
		if _, err := b.Subscribe(SubscribeRequest{}); !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("Subscribe after Close: %v, want ErrSubscriptionClosed", err)
		}
		publishEach(b, 1)
		if got := b.LastIndex(); got != 0 {
			t.Fatalf("Publish after Close was applied: LastIndex = %d", got)
		}
		b.Close() // idempotent
		b.Purge() // no-op once closed
	})
}
