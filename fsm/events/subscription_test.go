package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestSubscribeFilter(t *testing.T) {
	const (
		node  = droverv1.Topic_TOPIC_NODE
		job   = droverv1.Topic_TOPIC_JOB
		alloc = droverv1.Topic_TOPIC_ALLOCATION
		eval  = droverv1.Topic_TOPIC_EVALUATION
	)
	// Each event's key is unique per index, so "index:key" names it.
	published := []struct {
		index  uint64
		events []*droverv1.Event
	}{
		{1, []*droverv1.Event{ev(node, "a", 1), ev(job, "b", 1), ev(alloc, "c", 1)}},
		{2, []*droverv1.Event{ev(eval, "d", 2)}},
		{3, []*droverv1.Event{ev(node, "b", 3), ev(job, "a", 3)}},
	}
	tests := []struct {
		name   string
		topics []droverv1.Topic
		keys   []string
		want   []string
	}{
		{name: "all", want: []string{"1:a,b,c", "2:d", "3:b,a"}},
		{name: "one topic", topics: []droverv1.Topic{node}, want: []string{"1:a", "3:b"}},
		{name: "two topics", topics: []droverv1.Topic{job, eval}, want: []string{"1:b", "2:d", "3:a"}},
		{name: "one key", keys: []string{"b"}, want: []string{"1:b", "3:b"}},
		{name: "keys", keys: []string{"c", "d"}, want: []string{"1:c", "2:d"}},
		{name: "topic and key", topics: []droverv1.Topic{node}, keys: []string{"b"}, want: []string{"3:b"}},
		{name: "topic matching nothing", topics: []droverv1.Topic{droverv1.Topic_TOPIC_UNSPECIFIED}},
		{name: "key matching nothing", keys: []string{"zzz"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBroker(Config{})
				for _, p := range published {
					b.Publish(p.index, p.events)
				}
				s := mustSubscribe(t, b, SubscribeRequest{FromIndex: 1, Topics: tt.topics, Keys: tt.keys})
				var got []string
				for range tt.want {
					batch := next(t, s)
					keys := make([]string, len(batch.Events))
					for i, e := range batch.Events {
						keys[i] = e.GetKey()
					}
					got = append(got, fmt.Sprintf("%d:%s", batch.Index, strings.Join(keys, ",")))
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("batches = %v, want %v", got, tt.want)
				}
				// Batches with no matching event are skipped, not returned empty.
				expectNoBatch(t, s)
			})
		})
	}
}

func TestSubscribeFromIndex(t *testing.T) {
	// MaxEvents 3 with one event per batch holds 30, 40, 50; 10 and 20
	// have been evicted.
	buffered := []uint64{10, 20, 30, 40, 50}
	tests := []struct {
		name       string
		from       uint64
		later      []uint64 // published after Subscribe
		want       []uint64
		wantMissed bool
	}{
		{name: "zero starts after subscribe", from: 0, later: []uint64{60}, want: []uint64{60}},
		{name: "exact newest", from: 50, later: []uint64{60}, want: []uint64{50, 60}},
		{name: "exact", from: 40, want: []uint64{40, 50}},
		{name: "exact oldest held", from: 30, want: []uint64{30, 40, 50}},
		{name: "between batches", from: 35, want: []uint64{40, 50}},
		{name: "between evicted and held", from: 25, want: []uint64{30, 40, 50}},
		{name: "newest evicted", from: 20, want: []uint64{30, 40, 50}, wantMissed: true},
		{name: "older than the buffer", from: 1, want: []uint64{30, 40, 50}, wantMissed: true},
		{name: "next index", from: 51, later: []uint64{51}, want: []uint64{51}},
		{name: "beyond newest waits", from: 70, later: []uint64{60, 70, 80}, want: []uint64{70, 80}},
		{name: "beyond newest, first later batch after it", from: 65, later: []uint64{60, 70}, want: []uint64{70}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBroker(Config{MaxEvents: 3})
				publishEach(b, buffered...)
				s := mustSubscribe(t, b, SubscribeRequest{FromIndex: tt.from})
				publishEach(b, tt.later...)
				assertIndexes(t, readIndexes(t, s, len(tt.want), tt.wantMissed), tt.want)
				expectNoBatch(t, s)
			})
		})
	}
}

func TestNextWaitsForFutureIndex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBroker(Config{})
		publishEach(b, 1, 2)
		s := mustSubscribe(t, b, SubscribeRequest{FromIndex: 5})

		got := make(chan Batch, 1)
		go func() {
			batch, err := s.Next(t.Context())
			if err != nil {
				t.Errorf("Next: %v", err)
			}
			got <- batch
		}()
		synctest.Wait()
		select {
		case batch := <-got:
			t.Fatalf("Next returned batch %d before index 5 was published", batch.Index)
		default:
		}

		publishEach(b, 3, 4) // still before FromIndex: Next keeps waiting
		synctest.Wait()
		select {
		case batch := <-got:
			t.Fatalf("Next returned batch %d, before FromIndex 5", batch.Index)
		default:
		}

		publishEach(b, 5)
		if batch := <-got; batch.Index != 5 || batch.Missed {
			t.Fatalf("Next = index %d missed %v, want 5 not missed", batch.Index, batch.Missed)
		}
	})
}

func TestLagDetection(t *testing.T) {
	t.Run("evicted after a read", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := NewBroker(Config{MaxEvents: 2})
			s := mustSubscribe(t, b, SubscribeRequest{})
			publishEach(b, 1)
			assertIndexes(t, readIndexes(t, s, 1, false), []uint64{1})
			publishEach(b, 2, 3, 4) // 2 is evicted before s reads it
			if err := nextErr(t, s); !errors.Is(err, ErrSubscriptionLagged) {
				t.Fatalf("Next = %v, want ErrSubscriptionLagged", err)
			}
			// Lagging is final for the subscription.
			if err := nextErr(t, s); !errors.Is(err, ErrSubscriptionLagged) {
				t.Fatalf("second Next = %v, want ErrSubscriptionLagged", err)
			}
		})
	})
	t.Run("filtered batches count", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := NewBroker(Config{MaxEvents: 2})
			s := mustSubscribe(t, b, SubscribeRequest{Topics: []droverv1.Topic{droverv1.Topic_TOPIC_NODE}})
			publishEach(b, 1)
			assertIndexes(t, readIndexes(t, s, 1, false), []uint64{1})
			// Index 2 matches no filter, but s cannot know that once it is gone.
			b.Publish(2, []*droverv1.Event{ev(droverv1.Topic_TOPIC_JOB, "j", 2)})
			publishEach(b, 3, 4)
			if err := nextErr(t, s); !errors.Is(err, ErrSubscriptionLagged) {
				t.Fatalf("Next = %v, want ErrSubscriptionLagged", err)
			}
		})
	})
	t.Run("keeping up never lags", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := NewBroker(Config{MaxEvents: 1})
			s := mustSubscribe(t, b, SubscribeRequest{})
			for i := uint64(1); i <= 100; i++ {
				publishEach(b, i)
				assertIndexes(t, readIndexes(t, s, 1, false), []uint64{i})
			}
		})
	})
	t.Run("evicted before the first read is Missed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := NewBroker(Config{MaxEvents: 2})
			s := mustSubscribe(t, b, SubscribeRequest{FromIndex: 1})
			publishEach(b, 1, 2, 3, 4)
			assertIndexes(t, readIndexes(t, s, 2, true), []uint64{3, 4})
			expectNoBatch(t, s)
		})
	})
}

func TestNextContext(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := NewBroker(Config{})
			s := mustSubscribe(t, b, SubscribeRequest{})
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { _, err := s.Next(ctx); errc <- err }()
			synctest.Wait()
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("Next after cancel = %v, want context.Canceled", err)
			}
			// The subscription is still usable with a live context.
			publishEach(b, 1)
			assertIndexes(t, readIndexes(t, s, 1, false), []uint64{1})
		})
	})
	t.Run("already cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := NewBroker(Config{})
			publishEach(b, 1)
			s := mustSubscribe(t, b, SubscribeRequest{FromIndex: 1})
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("Next = %v, want context.Canceled", err)
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := mustSubscribe(t, NewBroker(Config{}), SubscribeRequest{})
			expectNoBatch(t, s) // asserts context.DeadlineExceeded
		})
	})
}

func TestSubscriptionClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBroker(Config{})
		s := mustSubscribe(t, b, SubscribeRequest{})
		other := mustSubscribe(t, b, SubscribeRequest{})
		errc := make(chan error, 1)
		go func() { _, err := s.Next(t.Context()); errc <- err }()
		synctest.Wait()

		s.Close()
		if err := <-errc; !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("blocked Next after Close = %v, want ErrSubscriptionClosed", err)
		}
		publishEach(b, 1)
		if err := nextErr(t, s); !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("Next after Close = %v, want ErrSubscriptionClosed", err)
		}
		s.Close() // idempotent
		// Closing one subscription leaves the others alone.
		assertIndexes(t, readIndexes(t, other, 1, false), []uint64{1})
	})
}
