// Package readindex lets a leader answer consistent reads without writing
// to the raft log, by the read-index method of the raft thesis (section
// 6.4): before a read is answered the leader records its commit index,
// confirms with a quorum that it still leads, and waits until its state has
// applied everything up to the recorded index. A leader that was paused,
// partitioned away or deposed fails the confirmation instead of answering
// from state that newer writes have overtaken.
//
// Reads that arrive while a confirmation round runs share the next round, so
// under load the cost is one quorum round trip per batch of reads, not per
// read.
package readindex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/internal/rounds"
)

// ErrNotLeader wraps every failure of a confirmation: this server does not
// lead (any more), or could not tell. The read belongs to another server.
var ErrNotLeader = errors.New("leadership not confirmed")

// Raft is what a Confirmer needs from the raft instance.
type Raft interface {
	// CommitIndex is the index of the newest entry known to be committed.
	CommitIndex() uint64
	// VerifyLeader confirms, by a heartbeat round, that a quorum still
	// follows this leader.
	VerifyLeader() raft.Future
	// Barrier commits an entry through the log and waits until everything
	// before it is applied.
	Barrier(timeout time.Duration) raft.Future
}

// Log tells the type of the entry at an index, or ok false when the entry
// is no longer in the log because a snapshot replaced it.
type Log func(index uint64) (t raft.LogType, ok bool, err error)

// State is the applied state the reads are answered from.
type State interface {
	// LatestIndex is the index of the newest log command applied.
	LatestIndex() uint64
	// WaitIndex returns once the state has applied index, or ctx ends.
	WaitIndex(ctx context.Context, index uint64) error
}

// Config wires a Confirmer.
type Config struct {
	Raft  Raft
	Log   Log
	State State
	// Stalls, if set, tells whether this process was recently stopped;
	// rounds then confirm through the log (see Confirmer.round).
	Stalls *StallDetector
	// BarrierTimeout bounds a confirmation through the log.
	BarrierTimeout time.Duration
}

// Confirmer runs confirmation rounds for consistent reads on the leader.
type Confirmer struct {
	cfg Config
	// rounds shares a confirmation among the reads that arrive while the
	// previous one runs: a round that already started may have read its
	// commit index before a read began, so it must not serve it.
	rounds *rounds.Rounds[uint64]
}

// New returns a Confirmer.
func New(cfg Config) *Confirmer {
	if cfg.BarrierTimeout <= 0 {
		cfg.BarrierTimeout = 10 * time.Second
	}
	c := &Confirmer{cfg: cfg}
	c.rounds = rounds.New(c.round)
	return c
}

// Confirm returns once a read made now may be answered from this server's
// state: a quorum confirmed, after the call began, that this server leads,
// and the state holds every entry committed when that confirmation began.
// It fails with an error wrapping ErrNotLeader when leadership was not
// confirmed, or with ctx's error.
func (c *Confirmer) Confirm(ctx context.Context) error {
	index, err := c.rounds.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("confirm leadership: %w", err)
		}
		return err
	}
	return c.waitApplied(ctx, index)
}

// round records the commit index, then confirms leadership.
//
// VerifyLeader counts a follower's answer to any heartbeat whose answer
// arrives after the round began, including a heartbeat sent before it. When
// this process has just been stopped (SIGSTOP, a frozen VM) such an answer
// can be seconds old, given before a new leader was elected. Rounds in the
// window after a stall therefore confirm through the log: a barrier entry
// commits only when a quorum accepts it in this leader's term.
func (c *Confirmer) round() (uint64, error) {
	index := c.cfg.Raft.CommitIndex()
	var err error
	if c.cfg.Stalls != nil && c.cfg.Stalls.Recent() {
		err = c.cfg.Raft.Barrier(c.cfg.BarrierTimeout).Error()
	} else {
		err = c.cfg.Raft.VerifyLeader().Error()
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return index, nil
}

// waitApplied waits until the state holds every entry up to index. Only
// log commands reach the state; raft's own entries (a new leader's no-op,
// barriers, configurations) do not, so the wait is for the last command at
// or before index. The log is read only while the state lags index, which
// is rare on a leader: its own writes are applied before they are
// acknowledged.
func (c *Confirmer) waitApplied(ctx context.Context, index uint64) error {
	target := index
	for target > c.cfg.State.LatestIndex() {
		t, ok, err := c.cfg.Log(target)
		if err != nil {
			return fmt.Errorf("read index %d: %w", index, err)
		}
		if !ok {
			// Compacted into a snapshot, which the state has applied.
			return nil
		}
		if t == raft.LogCommand {
			break
		}
		target--
	}
	if err := c.cfg.State.WaitIndex(ctx, target); err != nil {
		return fmt.Errorf("wait for read index %d: %w", index, err)
	}
	return nil
}
