package events

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// sentinelKey marks the last batch of a concurrency test, so subscribers
// know when to stop without any timing.
const sentinelKey = "sentinel"

// collect reads batches until the sentinel and returns their indexes and
// how many events were received. It uses t.Error, not t.Fatal, because it
// runs on its own goroutine.
func collect(ctx context.Context, t *testing.T, s *Subscription) (indexes []uint64, events int, err error) {
	for {
		batch, err := s.Next(ctx)
		if err != nil {
			return indexes, events, err
		}
		for _, e := range batch.Events {
			if e.GetIndex() != batch.Index {
				t.Errorf("event at index %d in batch %d", e.GetIndex(), batch.Index)
			}
			if e.GetKey() == sentinelKey {
				return indexes, events, nil
			}
		}
		indexes = append(indexes, batch.Index)
		events += len(batch.Events)
	}
}

// TestConcurrentSubscribersReceiveEveryBatch runs many subscribers, some
// subscribing while batches are published, against one publisher; the
// buffer holds everything, so each must see every batch once, in order.
func TestConcurrentSubscribersReceiveEveryBatch(t *testing.T) {
	const (
		batches     = 2000
		subscribers = 32
		late        = 16 // subscribe from index 1 while publishing
	)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	b := NewBroker(Config{MaxEvents: 4 * batches})
	topics := []droverv1.Topic{droverv1.Topic_TOPIC_NODE, droverv1.Topic_TOPIC_JOB}

	type result struct {
		indexes []uint64
		events  int
		jobOnly bool
	}
	results := make(chan result, subscribers+late)
	var wg sync.WaitGroup
	follow := func(s *Subscription, jobOnly bool) {
		wg.Go(func() {
			indexes, events, err := collect(ctx, t, s)
			if err != nil {
				t.Errorf("subscriber: %v", err)
			}
			results <- result{indexes, events, jobOnly}
		})
	}
	for i := range subscribers {
		req := SubscribeRequest{}
		jobOnly := i%4 == 0
		if jobOnly {
			req.Topics = []droverv1.Topic{droverv1.Topic_TOPIC_JOB}
		}
		follow(mustSubscribe(t, b, req), jobOnly)
	}

	wantJobEvents := 0
	publisherDone := make(chan struct{})
	go func() {
		defer close(publisherDone)
		for i := uint64(1); i <= batches; i++ {
			// Batch i holds i%3+1 events, alternating node and job topics.
			events := make([]*droverv1.Event, i%3+1)
			for j := range events {
				events[j] = ev(topics[j%2], "k", i)
				if j%2 == 1 {
					wantJobEvents++
				}
			}
			b.Publish(i, events)
		}
		b.Publish(batches+1, []*droverv1.Event{
			ev(droverv1.Topic_TOPIC_NODE, sentinelKey, batches+1),
			ev(droverv1.Topic_TOPIC_JOB, sentinelKey, batches+1),
		})
	}()
	for range late {
		follow(mustSubscribe(t, b, SubscribeRequest{FromIndex: 1}), false)
	}
	wg.Wait()
	<-publisherDone
	close(results)

	for r := range results {
		if r.jobOnly {
			// Only batches with at least two events hold a job event.
			want := 0
			for i := uint64(1); i <= batches; i++ {
				if i%3+1 >= 2 {
					want++
				}
			}
			if len(r.indexes) != want || r.events != wantJobEvents {
				t.Errorf("job subscriber: %d batches %d events, want %d batches %d events", len(r.indexes), r.events, want, wantJobEvents)
			}
			assertIncreasing(t, r.indexes)
			continue
		}
		if len(r.indexes) != batches {
			t.Errorf("subscriber received %d batches, want %d", len(r.indexes), batches)
			continue
		}
		for i, idx := range r.indexes {
			if idx != uint64(i+1) {
				t.Errorf("batch #%d has index %d, want %d", i, idx, i+1)
				break
			}
		}
	}
}

// TestConcurrentPublishers checks that concurrent Publish calls keep
// indexes strictly increasing and that every subscriber sees the same
// sequence.
func TestConcurrentPublishers(t *testing.T) {
	const (
		publishers  = 4
		perWorker   = 500
		subscribers = 8
	)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	// Room for every batch plus the sentinel: nothing may be evicted, or a
	// subscriber that has not read its first batch yet would rightly skip
	// to the oldest one held and see fewer batches than the others.
	b := NewBroker(Config{MaxEvents: 2 * publishers * perWorker})

	results := make([][]uint64, subscribers)
	var subs sync.WaitGroup
	for i := range subscribers {
		s := mustSubscribe(t, b, SubscribeRequest{})
		subs.Go(func() {
			indexes, _, err := collect(ctx, t, s)
			if err != nil {
				t.Errorf("subscriber: %v", err)
			}
			results[i] = indexes
		})
	}

	var counter atomic.Uint64
	var pubs sync.WaitGroup
	for range publishers {
		pubs.Go(func() {
			for range perWorker {
				i := counter.Add(1)
				b.Publish(i, nodeEvents(i, 1))
			}
		})
	}
	pubs.Wait()
	last := b.LastIndex()
	b.Publish(last+1, []*droverv1.Event{ev(droverv1.Topic_TOPIC_NODE, sentinelKey, last+1)})
	subs.Wait()

	for i, got := range results {
		assertIncreasing(t, got)
		if len(got) == 0 || got[len(got)-1] != last {
			t.Fatalf("subscriber %d ended at %v, want LastIndex %d", i, got[max(0, len(got)-1):], last)
		}
		if i > 0 && !slices.Equal(got, results[0]) {
			t.Fatalf("subscriber %d saw %d batches, subscriber 0 saw %d; all must see the same", i, len(got), len(results[0]))
		}
	}
}

// TestConcurrentLaggingSubscribers uses a tiny buffer so subscribers lag
// under load: each must see consecutive indexes until it either reaches the
// end or is told it lagged.
func TestConcurrentLaggingSubscribers(t *testing.T) {
	const (
		batches     = 3000
		subscribers = 16
	)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	b := NewBroker(Config{MaxEvents: 8})
	var wg sync.WaitGroup
	for range subscribers {
		s := mustSubscribe(t, b, SubscribeRequest{})
		wg.Go(func() {
			var prev uint64
			for {
				batch, err := s.Next(ctx)
				if errors.Is(err, ErrSubscriptionLagged) {
					return
				}
				if err != nil {
					t.Errorf("Next: %v", err)
					return
				}
				// A gap before the first batch is reported with Missed.
				if prev != 0 && batch.Index != prev+1 {
					t.Errorf("batch %d after %d: a gap must be reported as ErrSubscriptionLagged", batch.Index, prev)
					return
				}
				if prev == 0 && (batch.Index != 1) != batch.Missed {
					t.Errorf("first batch %d: Missed = %v", batch.Index, batch.Missed)
				}
				prev = batch.Index
				if batch.Index == batches {
					return
				}
			}
		})
	}
	for i := uint64(1); i <= batches; i++ {
		b.Publish(i, nodeEvents(i, 1))
		if _, events := b.held(); events > 8 {
			t.Errorf("held %d events, bound is 8", events)
			break
		}
	}
	wg.Wait()
}

func assertIncreasing(t *testing.T, indexes []uint64) {
	t.Helper()
	for i := 1; i < len(indexes); i++ {
		if indexes[i] <= indexes[i-1] {
			t.Fatalf("index %d follows %d: batches must arrive once, in index order", indexes[i], indexes[i-1])
		}
	}
}
