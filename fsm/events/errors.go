package events

import "errors"

// ErrSubscriptionLagged is returned by Subscription.Next when the batch after
// the last one the subscriber read has been evicted, so continuing would
// silently skip changes.
var ErrSubscriptionLagged = errors.New("event subscriber fell behind the event buffer; resubscribe from the last index received")

// ErrSubscriptionClosed is returned by Subscription.Next, and by
// Broker.Subscribe, once the subscription has been closed or the broker has
// been purged or closed.
var ErrSubscriptionClosed = errors.New("event subscription closed by the server; resubscribe")
