package events

import (
	"context"
	"sync"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// SubscribeRequest selects what a subscriber receives.
type SubscribeRequest struct {
	// FromIndex is the first raft index wanted; 0 means only batches
	// published after Subscribe returns. Batches older than the buffer are
	// skipped and the first batch returned has Missed set; an index beyond
	// the newest published one is waited for.
	FromIndex uint64
	// Topics selects events by topic; empty means all topics.
	Topics []droverv1.Topic
	// Keys selects events by key; empty means all keys.
	Keys []string
}

// Batch is the events of one raft entry that match the subscription's filter.
type Batch struct {
	// Index is the raft index of the entry.
	Index uint64
	// Events are shared with the broker and every other subscriber: do not
	// modify them or the slice's elements.
	Events []*droverv1.Event
	// Missed is set on the first batch a subscription returns when batches
	// at or after FromIndex had already been evicted before the subscriber
	// could read them.
	Missed bool
}

// Subscription reads batches from a Broker in index order. Next must not be
// called concurrently; Close may be called from any goroutine.
type Subscription struct {
	b         *Broker
	next      uint64 // seq of the next batch to read
	fromIndex uint64
	missed    bool // not yet reported on a returned batch
	returned  bool // a batch has been returned; later gaps are lags
	filter    filter

	ended     <-chan struct{} // the broker's Purge/Close signal at Subscribe
	closed    chan struct{}
	closeOnce sync.Once
}

// Subscribe starts a subscription selected by req. It fails with
// ErrSubscriptionClosed once the broker is closed.
func (b *Broker) Subscribe(req SubscribeRequest) (*Subscription, error) {
	f := newFilter(req.Topics, req.Keys)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrSubscriptionClosed
	}
	seq, missed := b.start(req.FromIndex)
	return &Subscription{
		b:         b,
		next:      seq,
		fromIndex: req.FromIndex,
		missed:    missed,
		filter:    f,
		ended:     b.ended,
		closed:    make(chan struct{}),
	}, nil
}

// Next blocks until the next matching batch and returns it. It returns
// ctx.Err() when ctx ends; ErrSubscriptionLagged when the batch after the
// last one returned has been evicted; and ErrSubscriptionClosed once the
// subscription is closed or the broker purged or closed. Before the first
// batch is returned there is no resume point to lose, so an eviction then
// skips to the oldest held batch and sets Missed instead of failing.
// Batches with no matching event are skipped, never returned empty.
func (s *Subscription) Next(ctx context.Context) (Batch, error) {
	b := s.b
	for {
		if s.isClosed() {
			return Batch{}, ErrSubscriptionClosed
		}
		if err := ctx.Err(); err != nil {
			return Batch{}, err
		}
		// Load the wake channel before checking published: a Publish after
		// the check closes this channel (or a newer one replaced it after
		// this one was closed), so the wait below cannot miss it.
		wake := b.wake.Load().(chan struct{})
		if s.next >= b.published.Load() {
			select {
			case <-wake:
			case <-ctx.Done():
				return Batch{}, ctx.Err()
			case <-s.closed:
				return Batch{}, ErrSubscriptionClosed
			case <-s.ended:
				return Batch{}, ErrSubscriptionClosed
			}
			continue
		}
		it := b.slots[s.next&b.mask].Load()
		if it == nil || it.seq != s.next {
			// Purge clears slots only after ending subscriptions, so a
			// cleared slot seen here is reported as what it was.
			if s.isClosed() {
				return Batch{}, ErrSubscriptionClosed
			}
			if s.returned {
				return Batch{}, ErrSubscriptionLagged
			}
			// Nothing returned yet, so there is no resume point to lose:
			// start again at the oldest held batch and report the gap the
			// same way Subscribe would have, with Missed.
			s.next = b.oldest()
			s.missed = true
			continue
		}
		s.next++
		if it.index < s.fromIndex {
			continue
		}
		events := s.filter.apply(it.events)
		if len(events) == 0 {
			continue
		}
		batch := Batch{Index: it.index, Events: events, Missed: s.missed}
		s.missed = false
		s.returned = true
		return batch, nil
	}
}

// Close ends the subscription: a blocked Next returns ErrSubscriptionClosed,
// as do later calls. Close is idempotent.
func (s *Subscription) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

func (s *Subscription) isClosed() bool {
	select {
	case <-s.closed:
		return true
	case <-s.ended:
		return true
	default:
		return false
	}
}
