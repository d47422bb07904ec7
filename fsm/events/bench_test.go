package events

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// BenchmarkPublish measures Publish while n subscribers follow the buffer;
// the cost per publish should not grow with n beyond waking them.
func BenchmarkPublish(b *testing.B) {
	events := []*droverv1.Event{
		ev(droverv1.Topic_TOPIC_NODE, "node-1", 0),
		ev(droverv1.Topic_TOPIC_ALLOCATION, "alloc-1", 0),
		ev(droverv1.Topic_TOPIC_JOB, "job-1", 0),
	}
	for _, n := range []int{0, 1, 16, 256} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			br := NewBroker(Config{})
			ctx := b.Context()
			var wg sync.WaitGroup
			for range n {
				s, err := br.Subscribe(SubscribeRequest{})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					for {
						_, err := s.Next(ctx)
						if errors.Is(err, ErrSubscriptionLagged) {
							// Slow subscribers resubscribe, as a stream would.
							if s, err = br.Subscribe(SubscribeRequest{}); err == nil {
								continue
							}
						}
						if err != nil {
							return
						}
					}
				})
			}
			b.ReportAllocs()
			var index uint64
			for b.Loop() {
				index++
				br.Publish(index, events)
			}
			br.Close()
			wg.Wait()
		})
	}
}
