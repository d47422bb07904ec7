package rpc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Bounds of blocking queries. A wait is cut to maxBlockingWait and then
// lengthened by a random share of up to 1/blockingJitterFraction, so that
// agents that started together do not all come back in the same instant.
const (
	maxBlockingWait        = 5 * time.Minute
	blockingJitterFraction = 16
	// catchUpWait bounds how long a server behind a caller's min_index
	// waits to catch up before it refuses the read: a follower in touch
	// with its leader catches up in milliseconds.
	catchUpWait = 5 * time.Second
)

// blockingWait clamps a requested wait and adds jitter.
func blockingWait(requested time.Duration) time.Duration {
	wait := requested
	if wait <= 0 || wait > maxBlockingWait {
		wait = maxBlockingWait
	}
	return wait + time.Duration(rand.Int64N(int64(wait)/blockingJitterFraction+1))
}

// blockingContext ends after the query's wait, when the caller goes away, or
// when the server starts shutting down, so that a long poll never holds up
// shutdown.
func (s *services) blockingContext(ctx context.Context, maxWait time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, blockingWait(maxWait))
	stop := context.AfterFunc(s.shutdown, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// query runs a read, as a blocking query when opts asks for one, and
// describes the state it was answered from.
func (s *services) query(ctx context.Context, opts *droverv1.QueryOptions, run func(*state.Snapshot) (uint64, error)) (*droverv1.QueryMeta, error) {
	ctx, cancel := s.blockingContext(ctx, opts.EffectiveMaxWait())
	defer cancel()
	if opts.GetMinIndex() > 0 {
		s.blocked.Add(1)
		defer s.blocked.Add(-1)
	}
	st := s.backend.State()
	if err := catchUp(ctx, st, opts.GetMinIndex()); err != nil {
		return nil, err
	}
	index, err := st.BlockingQuery(ctx, opts.GetMinIndex(), heldWhileReading(ctx, opts.GetMinIndex(), run))
	if err != nil {
		return nil, err
	}
	if err := notBehind(st.LatestIndex(), opts.GetMinIndex()); err != nil {
		return nil, err
	}
	last := s.backend.LastContact()
	if consistentAnswer(ctx) {
		last = 0
	}
	return &droverv1.QueryMeta{Index: index, KnownLeader: s.backend.KnownLeader(), LastContact: lastContact(last)}, nil
}

// catchUp waits, at most catchUpWait, for a server whose state is behind
// the caller's min_index to catch up, so that a caller that moved here from
// a server further ahead is told at once to go elsewhere when this one is
// cut off, rather than after its whole wait.
func catchUp(ctx context.Context, st *state.StateStore, minIndex uint64) error {
	if st.LatestIndex() >= minIndex {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	if _, err := st.SnapshotMinIndex(wait, minIndex); err != nil && ctx.Err() == nil {
		return notBehind(st.LatestIndex(), minIndex)
	}
	return nil
}

// notBehind refuses to answer from a state older than what the caller has
// already seen (its min_index, from an answer of another server): the
// answer would go back in time. The caller retries, here once this server
// has caught up, or elsewhere.
func notBehind(applied, minIndex uint64) error {
	if applied >= minIndex {
		return nil
	}
	return fmt.Errorf("this server has applied the raft log up to index %d, behind index %d the caller has already seen: %w",
		applied, minIndex, ErrUnavailable)
}

// lastContact is QueryMeta.last_contact: unset for a server that never
// heard from a leader.
func lastContact(d time.Duration) *durationpb.Duration {
	if d < 0 {
		return nil
	}
	return durationpb.New(d)
}

// pageOf converts the API's page options; a zero size means the default.
func pageOf(p *droverv1.PageOptions) state.Page {
	size := int(p.GetPageSize())
	if size == 0 {
		size = droverv1.DefaultPageSize
	}
	return state.Page{Prefix: p.GetPrefix(), Size: size, After: p.GetNextToken()}
}

// atLeastOne keeps a result index from being zero, which would make the
// caller's next blocking query return at once.
func atLeastOne(index uint64) uint64 {
	return max(index, 1)
}
