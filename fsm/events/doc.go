// Package events holds the recent event batches the FSM publishes after
// applying each raft entry, and serves them to EventService.Stream
// subscribers from a raft index.
//
// A Broker keeps a bounded ring of batches (one batch per raft entry),
// evicting the oldest batches once more than Config.MaxEvents events are
// held. A Subscription reads the ring at its own pace; a subscriber that
// falls behind the eviction point is told so (ErrSubscriptionLagged) rather
// than silently skipping changes, and is expected to resubscribe.
//
// Concurrency contract: all Broker methods are safe for concurrent use.
// Publish never blocks on subscribers and does no per-subscriber work:
// subscribers read published batches without taking the broker's lock and
// wait on a single broadcast channel. A Subscription's Next must be called
// from one goroutine at a time; its Close may be called from any goroutine.
//
// Published events are shared, not copied: every subscriber receives the
// same *droverv1.Event pointers, so neither the publisher nor subscribers
// may modify an event (or a published events slice) after Publish.
package events
