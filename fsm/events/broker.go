package events

import (
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// defaultMaxEvents is used when Config.MaxEvents is not positive.
const defaultMaxEvents = 16384

// Config sizes the buffer.
type Config struct {
	// MaxEvents bounds how many events the buffer holds across all batches;
	// the oldest batches are evicted first. Default 16384 when zero (or
	// negative). A single batch larger than MaxEvents is still held, alone,
	// so that subscribers can read it.
	MaxEvents int
}

// item is one published batch. It is never modified after it is stored in
// a slot, which is what lets subscribers read it without locking.
type item struct {
	// seq is the batch's position in the broker's unbounded sequence; it
	// tells a subscriber whether a slot still holds the batch it wants or
	// has been cleared or reused since.
	seq    uint64
	index  uint64
	events []*droverv1.Event
}

// Broker buffers published event batches and hands them to subscriptions.
// The zero value is not usable; create one with NewBroker.
type Broker struct {
	maxEvents int
	// slots is a ring indexed by seq&mask. It has at least MaxEvents slots,
	// and every held batch has at least one event, so the held batches
	// always fit without overwriting each other.
	slots []atomic.Pointer[item]
	mask  uint64

	// published is the seq the next batch will get: every lower seq has
	// been published. Written under mu, read lock-free by subscribers.
	published atomic.Uint64
	// wake holds a chan struct{} that Publish closes and replaces, so that
	// all waiting subscribers wake with one close and no per-subscriber work.
	wake atomic.Value
	// lastIndex is written under mu and read lock-free by LastIndex.
	lastIndex atomic.Uint64

	mu    sync.Mutex
	first uint64 // seq of the oldest held batch; equals published when empty
	count int    // events held
	// evictedIndex is the raft index of the newest batch ever dropped, by
	// eviction or Purge; a subscriber starting at or below it may have
	// missed events.
	evictedIndex uint64
	// ended is closed to end every subscription created before it closes.
	ended  chan struct{}
	closed bool
}

// NewBroker returns an empty Broker sized by cfg.
func NewBroker(cfg Config) *Broker {
	maxEvents := cfg.MaxEvents
	if maxEvents <= 0 {
		maxEvents = defaultMaxEvents
	}
	// A power-of-two ring turns the slot lookup into a mask.
	size := uint64(1) << bits.Len64(uint64(maxEvents-1))
	b := &Broker{
		maxEvents: maxEvents,
		slots:     make([]atomic.Pointer[item], size),
		mask:      size - 1,
		ended:     make(chan struct{}),
	}
	b.wake.Store(make(chan struct{}))
	return b
}

// Publish appends the events of the raft entry at index. It keeps the
// events slice, so the caller must not modify it afterwards. An empty slice
// publishes nothing; an index not greater than LastIndex is ignored, as is
// every call after Close. Publish never blocks on subscribers.
func (b *Broker) Publish(index uint64, events []*droverv1.Event) {
	if len(events) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || index <= b.lastIndex.Load() {
		return
	}
	b.evict(len(events))
	seq := b.published.Load()
	b.slots[seq&b.mask].Store(&item{seq: seq, index: index, events: events})
	b.count += len(events)
	b.lastIndex.Store(index)
	// The slot is stored before published is advanced, so a subscriber that
	// sees the new published value finds the batch in its slot.
	b.published.Store(seq + 1)
	// Waiters loaded wake before checking published, so whichever channel
	// they hold is this one or an older, already closed one.
	close(b.wake.Swap(make(chan struct{})).(chan struct{}))
}

// evict drops the oldest batches until incoming more events fit, or nothing
// is held. Callers hold mu.
func (b *Broker) evict(incoming int) {
	published := b.published.Load()
	for b.count+incoming > b.maxEvents && b.first < published {
		slot := &b.slots[b.first&b.mask]
		it := slot.Load()
		b.count -= len(it.events)
		b.evictedIndex = it.index
		slot.Store(nil)
		b.first++
	}
}

// LastIndex is the index of the newest published batch (0 if none). Purge
// keeps it, so that indexes stay increasing across a snapshot restore.
func (b *Broker) LastIndex() uint64 {
	return b.lastIndex.Load()
}

// Purge drops every buffered batch and ends all current subscriptions with
// ErrSubscriptionClosed. The FSM calls it when the whole state is replaced
// from a raft snapshot, so that subscribers resubscribe instead of silently
// missing changes; a resubscription from an index that was purged gets
// Missed on its first batch.
func (b *Broker) Purge() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.endSubscriptions()
	b.ended = make(chan struct{})
}

// Close ends all current subscriptions with ErrSubscriptionClosed and makes
// later Subscribe calls fail with it; later Publish calls are ignored. The
// server calls it on shutdown so that streams blocked in Next return.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	b.endSubscriptions()
}

// endSubscriptions ends current subscriptions and drops every held batch.
// Callers hold mu.
func (b *Broker) endSubscriptions() {
	// Close first: a subscriber that finds a cleared slot then checks ended,
	// and must report ErrSubscriptionClosed rather than ErrSubscriptionLagged.
	close(b.ended)
	for published := b.published.Load(); b.first < published; b.first++ {
		b.slots[b.first&b.mask].Store(nil)
	}
	b.count = 0
	b.evictedIndex = b.lastIndex.Load()
}

// start returns the seq a subscription from fromIndex begins at, and whether
// events at or after fromIndex may already have been dropped. Callers hold mu.
func (b *Broker) start(fromIndex uint64) (seq uint64, missed bool) {
	published := b.published.Load()
	if fromIndex == 0 || fromIndex > b.lastIndex.Load() {
		return published, false
	}
	// Held batches are in index order: binary search for the first one at
	// or after fromIndex. The newest held batch is at lastIndex >= fromIndex,
	// so the search finds one unless the buffer is empty after Purge.
	n := int(published - b.first)
	i := sort.Search(n, func(i int) bool {
		return b.slots[(b.first+uint64(i))&b.mask].Load().index >= fromIndex
	})
	return b.first + uint64(i), fromIndex <= b.evictedIndex
}

// oldest returns the seq of the oldest held batch (the next published one
// when nothing is held).
func (b *Broker) oldest() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.first
}

// held reports how many batches and events the buffer holds.
func (b *Broker) held() (batches, events int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.published.Load() - b.first), b.count
}
