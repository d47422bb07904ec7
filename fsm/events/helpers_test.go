package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// testTimeout bounds every blocking call in tests that run on the real
// clock; inside a synctest bubble it is virtual and costs nothing.
const testTimeout = 30 * time.Second

func ev(topic droverv1.Topic, key string, index uint64) *droverv1.Event {
	return &droverv1.Event{Topic: topic, Type: "Test", Key: key, Index: index}
}

// nodeEvents returns n node events written at index.
func nodeEvents(index uint64, n int) []*droverv1.Event {
	out := make([]*droverv1.Event, n)
	for i := range out {
		out[i] = ev(droverv1.Topic_TOPIC_NODE, fmt.Sprintf("node-%d-%d", index, i), index)
	}
	return out
}

// publishEach publishes one node event at each index.
func publishEach(b *Broker, indexes ...uint64) {
	for _, i := range indexes {
		b.Publish(i, nodeEvents(i, 1))
	}
}

func mustSubscribe(t *testing.T, b *Broker, req SubscribeRequest) *Subscription {
	t.Helper()
	s, err := b.Subscribe(req)
	if err != nil {
		t.Fatalf("Subscribe(%+v): %v", req, err)
	}
	t.Cleanup(s.Close)
	return s
}

// next returns the next batch, failing the test on any error.
func next(t *testing.T, s *Subscription) Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	batch, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return batch
}

// nextErr returns the error of the next Next call, failing if it succeeds.
func nextErr(t *testing.T, s *Subscription) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	batch, err := s.Next(ctx)
	if err == nil {
		t.Fatalf("Next returned batch %d, want an error", batch.Index)
	}
	return err
}

// expectNoBatch asserts that Next blocks until its deadline. Call it only
// inside a synctest bubble, where the deadline passes as soon as every
// goroutine is blocked, so the assertion is exact and instant.
func expectNoBatch(t *testing.T, s *Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	batch, err := s.Next(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = batch %d, %v; want it to block until the deadline", batch.Index, err)
	}
}

// readIndexes reads n batches and returns their indexes, checking that only the
// first may have Missed set and that it equals wantMissed.
func readIndexes(t *testing.T, s *Subscription, n int, wantMissed bool) []uint64 {
	t.Helper()
	var got []uint64
	for i := range n {
		batch := next(t, s)
		if want := wantMissed && i == 0; batch.Missed != want {
			t.Fatalf("batch %d (#%d): Missed = %v, want %v", batch.Index, i, batch.Missed, want)
		}
		got = append(got, batch.Index)
	}
	return got
}

func assertIndexes(t *testing.T, got, want []uint64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("indexes = %v, want %v", got, want)
	}
}
