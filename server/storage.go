package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

const (
	// storageCheckInterval is how often a leader looks at its data dir's
	// free space.
	storageCheckInterval = time.Second
	// handOverRetry spaces a full leader's attempts to hand leadership
	// over, so that servers that are all full do not pass it round.
	handOverRetry = 10 * time.Second
)

// storageError is why this server cannot store writes now, wrapping
// rpc.ErrUnavailable (the write was not stored, and may be retried, on
// this server once space is freed or on the server that takes leadership
// over) and raftnode.ErrDataDirFull; nil when it can store them.
func (s *Server) storageError() error {
	if err := s.raft.StorageError(); err != nil {
		return fmt.Errorf("%w: server %s did not store the write: %w", rpc.ErrUnavailable, s.id, err)
	}
	return nil
}

// storageWatch is the leader duty that hands leadership over while this
// server's data dir is full: a leader that cannot store entries cannot
// lead. Raft steps down by itself when an append fails, but then any
// server may win the election, this one included; a transfer picks a
// server with space.
type storageWatch struct {
	s *Server

	mu       sync.Mutex
	lastTry  time.Time
	lastWarn time.Time
}

func (w *storageWatch) duty() LeaderDuty {
	return periodicDuty("storage watch", storageCheckInterval, w.round)
}

func (w *storageWatch) round(ctx context.Context) {
	full := w.s.raft.StorageError()
	if full == nil {
		return
	}
	w.mu.Lock()
	if time.Since(w.lastTry) < handOverRetry {
		w.mu.Unlock()
		return
	}
	w.lastTry = time.Now()
	w.mu.Unlock()
	if err := w.handOver(ctx, full); err != nil && ctx.Err() == nil {
		w.mu.Lock()
		warn := time.Since(w.lastWarn) >= time.Minute
		if warn {
			w.lastWarn = time.Now()
		}
		w.mu.Unlock()
		if warn {
			w.s.logger.Warn("data dir full; keeping leadership and refusing writes", "reason", err, "full", full)
		}
	}
}

// handOver transfers leadership to the voter with space that is furthest
// along, and fails when there is none.
func (w *storageWatch) handOver(ctx context.Context, full error) error {
	s := w.s
	target, err := w.pickTarget(ctx)
	if err != nil {
		return err
	}
	s.logger.Warn("data dir full; handing leadership over", "to", target.ID, "full", full)
	if err := s.raft.Raft().LeadershipTransferToServer(target.ID, target.Address).Error(); err != nil {
		return fmt.Errorf("transfer leadership to %s: %w", target.ID, err)
	}
	return nil
}

// pickTarget asks every other voter whether it can store writes, and
// picks the one with space that is furthest along; failing that, one that
// could not be asked.
func (w *storageWatch) pickTarget(ctx context.Context) (raft.Server, error) {
	s := w.s
	conf, err := s.configuration()
	if err != nil {
		return raft.Server{}, err
	}
	snap := s.state.Snapshot()
	type candidate struct {
		srv  raft.Server
		info *droverv1.ServerInfoResponse
		err  error
	}
	var candidates []*candidate
	for _, srv := range conf.Servers {
		if srv.Suffrage == raft.Voter && string(srv.ID) != s.id {
			candidates = append(candidates, &candidate{srv: srv})
		}
	}
	if len(candidates) == 0 {
		return raft.Server{}, errors.New("no other voter")
	}
	var wg sync.WaitGroup
	var unknown []raft.Server
	for _, c := range candidates {
		m := snap.ServerByID(string(c.srv.ID))
		if m == nil {
			// Not announced yet (its record needs a write, which this
			// leader refuses): it cannot be asked, but may have space.
			unknown = append(unknown, c.srv)
			c.err = errors.New("gRPC address unknown")
			continue
		}
		wg.Go(func() { c.info, c.err = s.peers.info(ctx, m.GetRpcAddr()) })
	}
	wg.Wait()
	var ready []*candidate
	var problems []error
	for _, c := range candidates {
		switch {
		case c.err != nil:
			problems = append(problems, fmt.Errorf("%s: %w", c.srv.ID, c.err))
		case c.info.GetStorageError() != "":
			problems = append(problems, fmt.Errorf("%s: %s", c.srv.ID, c.info.GetStorageError()))
		default:
			ready = append(ready, c)
		}
	}
	switch {
	case len(ready) > 0:
		best := slices.MaxFunc(ready, func(a, b *candidate) int { return cmp.Compare(a.info.GetLastIndex(), b.info.GetLastIndex()) })
		return best.srv, nil
	case len(unknown) > 0:
		return unknown[0], nil
	}
	return raft.Server{}, fmt.Errorf("no other voter can store writes: %w", errors.Join(problems...))
}
