package test_test

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// entryFollower follows the event stream raft entry by raft entry, handing
// each whole entry to a callback on its own goroutine, and lets a test wait
// until it has passed an index. Whatever the callback wrote before that
// index is visible to the test once waitFor returns.
type entryFollower struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	index    uint64        // last entry handed over
	advanced chan struct{} // closed when index moves
	err      error         // why the stream ended early
}

// followEntries streams the topics' events from index from and calls
// entry with each raft entry's events, in order.
func followEntries(ctx context.Context, conn grpc.ClientConnInterface, from uint64, topics []droverv1.Topic, entry func(*droverv1.StreamEventsResponse)) *entryFollower {
	ctx, cancel := context.WithCancel(ctx)
	f := &entryFollower{cancel: cancel, done: make(chan struct{}), advanced: make(chan struct{})}
	go f.follow(ctx, conn, from, topics, entry)
	return f
}

func (f *entryFollower) follow(ctx context.Context, conn grpc.ClientConnInterface, from uint64, topics []droverv1.Topic, entry func(*droverv1.StreamEventsResponse)) {
	defer close(f.done)
	stream, err := droverv1.NewEventServiceClient(conn).Stream(ctx, &droverv1.StreamEventsRequest{FromIndex: from, Topics: topics})
	for err == nil {
		var resp *droverv1.StreamEventsResponse
		if resp, err = stream.Recv(); err != nil {
			break
		}
		if resp.GetEventsMissed() {
			err = fmt.Errorf("event stream lost events before index %d", resp.GetIndex())
			break
		}
		entry(resp)
		f.mu.Lock()
		f.index = resp.GetIndex()
		close(f.advanced)
		f.advanced = make(chan struct{})
		f.mu.Unlock()
	}
	if ctx.Err() == nil {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
	}
}

// waitFor waits until the follower has handed over the entry at index (or
// a later one).
func (f *entryFollower) waitFor(ctx context.Context, index uint64) error {
	for {
		f.mu.Lock()
		reached, advanced, err := f.index >= index, f.advanced, f.err
		f.mu.Unlock()
		switch {
		case err != nil:
			return fmt.Errorf("event stream: %w", err)
		case reached:
			return nil
		}
		select {
		case <-advanced:
		case <-f.done:
			return fmt.Errorf("event stream ended before index %d", index)
		case <-ctx.Done():
			return fmt.Errorf("event stream did not reach index %d: %w", index, ctx.Err())
		}
	}
}

// failure returns why the stream ended early, if it has.
func (f *entryFollower) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// stop ends the stream and waits for the callback to be done.
func (f *entryFollower) stop() {
	f.cancel()
	<-f.done
}
