package plan

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// DefaultSnapshotWait bounds the wait for the state to reach the index a
// plan was made at. Waiting longer would hold up every scheduler behind it.
const DefaultSnapshotWait = 10 * time.Second

// Committer writes a plan result through raft and returns once this server
// has applied it, with the entry's raft index. It must not modify the
// entry: its allocations are shared with the plan's result and with the
// check of the next plan.
type Committer interface {
	CommitPlan(ctx context.Context, e *droverv1.PlanResultEntry) (index uint64, err error)
}

// Config tunes an Applier.
type Config struct {
	// Logger receives node rejections at debug level; nil discards.
	Logger *slog.Logger
	// Now returns the time in unix nanoseconds; nil means the wall clock.
	Now func() int64
	// SnapshotWait bounds the wait for the state to reach a plan's
	// snapshot index; zero means DefaultSnapshotWait.
	SnapshotWait time.Duration
	// AllocCIDR is the allocation network (the schedulers'): a new
	// placement whose address another allocation took since it was planned
	// gets a free one from it. Invalid (zero), such a node is dropped.
	AllocCIDR netip.Prefix
	// Usage is the server's cache of what nodes' stored allocations hold,
	// shared with its schedulers; relocating placements starts from it.
	// Nil counts every candidate node's allocations instead.
	Usage *scheduler.UsageCache
}

// ApplierStats counts what the applier did since it was made.
type ApplierStats struct {
	// Applied counts plans committed through raft.
	Applied uint64
	// PartiallyRejected counts plans of which at least one node was dropped.
	PartiallyRejected uint64
	// NodesRejected counts the nodes dropped from plans.
	NodesRejected uint64
	// AddressesReplaced counts placements that got another address than
	// their plan asked for, taken meanwhile; PortsReplaced the dynamic
	// ports of placements given another number, likewise.
	AddressesReplaced uint64
	PortsReplaced     uint64
	// PlacementsRelocated counts placements committed on one of the
	// alternates their scheduler named, their own node having been filled
	// by another plan meanwhile.
	PlacementsRelocated uint64
}

// Applier is the leader's plan applier: it takes plans from the queue one at
// a time, checks every node of each against the newest state, and commits
// what fits in one raft entry per plan. The check of a plan overlaps the
// raft writes of the plans before it, up to MaxWritesInFlight of them.
type Applier struct {
	cfg   Config
	queue *Queue
	store *state.StateStore
	raft  Committer

	applied, partiallyRejected, nodesRejected, addressesReplaced atomic.Uint64
	portsReplaced, placementsRelocated                           atomic.Uint64

	// verified, set by tests, is called after each plan is checked.
	verified func(*droverv1.Plan)
}

// NewApplier returns an applier of q's plans against st that commits
// through c. Run starts it.
func NewApplier(cfg Config, q *Queue, st *state.StateStore, c Committer) *Applier {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.SnapshotWait <= 0 {
		cfg.SnapshotWait = DefaultSnapshotWait
	}
	return &Applier{cfg: cfg, queue: q, store: st, raft: c}
}

// Stats returns the applier's counters.
func (a *Applier) Stats() ApplierStats {
	return ApplierStats{
		Applied:           a.applied.Load(),
		PartiallyRejected: a.partiallyRejected.Load(),
		NodesRejected:     a.nodesRejected.Load(),
		AddressesReplaced: a.addressesReplaced.Load(),
		PortsReplaced:     a.portsReplaced.Load(),

		PlacementsRelocated: a.placementsRelocated.Load(),
	}
}

// MaxWritesInFlight bounds the plans whose raft writes are dispatched and
// not yet applied. Under load a write takes a round trip, an fsync and its
// turn in the FSM; with one write at a time the applier commits one plan
// per such wait, however many plans are queued, so concurrent evaluations
// queue behind each other. The allocations of the plans in flight are laid
// over the state each plan is checked against, so the bound also bounds
// what a check looks through.
const MaxWritesInFlight = 8

// commit is a plan whose raft write has been dispatched.
type commit struct {
	// allocs are the plan's allocations, laid over the snapshot later
	// plans are checked against, which may not hold them yet.
	allocs []*droverv1.Allocation
	done   chan struct{}
	// index is the entry's raft index once done is closed; zero if the
	// write failed.
	index uint64
}

// pipeline is the state of the apply loop: up to MaxWritesInFlight raft
// writes in flight, oldest first. Their entries may reach the log in
// another order than they were dispatched in; that is safe because plans
// in flight together belong to different evaluations, and so to different
// jobs (the broker hands out one evaluation per job at a time, and a
// worker's next plan waits for the answer to its last), so no two of them
// touch the same allocation or deployment, and each was checked with the
// others' placements counted.
type pipeline struct {
	inflight []*commit
	// flying is the allocations of every write in flight, in dispatch
	// order; nil when none is.
	flying *overlay
	// lastIndex is the raft index of the latest plan committed, the least
	// index the next plan's snapshot must hold.
	lastIndex uint64
}

// add records a dispatched write.
func (pl *pipeline) add(c *commit) {
	pl.inflight = append(pl.inflight, c)
	pl.lay(c)
}

// lay puts a write's allocations over the state later plans are checked
// against.
func (pl *pipeline) lay(c *commit) {
	if pl.flying == nil {
		pl.flying = newOverlay()
	}
	pl.flying.add(c.allocs)
}

// settle forgets the writes in flight that are done, remembering their
// indexes.
func (pl *pipeline) settle() {
	kept := pl.inflight[:0]
	for _, c := range pl.inflight {
		select {
		case <-c.done:
			pl.lastIndex = max(pl.lastIndex, c.index)
		default:
			kept = append(kept, c)
		}
	}
	if len(kept) == len(pl.inflight) {
		return
	}
	clear(pl.inflight[len(kept):])
	pl.inflight = kept
	pl.flying = nil
	for _, c := range kept {
		pl.lay(c)
	}
}

// waitOldest blocks until the oldest write in flight is done.
func (pl *pipeline) waitOldest() {
	if len(pl.inflight) > 0 {
		<-pl.inflight[0].done
	}
	pl.settle()
}

// waitAll blocks until every write in flight is done.
func (pl *pipeline) waitAll() {
	for _, c := range pl.inflight {
		<-c.done
	}
	pl.settle()
}

// Run applies plans until ctx ends (this server lost leadership). A plan it
// has taken but not dispatched is then failed with ErrDisabled, and so are
// the plans in flight whose writes fail; Run returns once those writes
// have finished. Plans still in the queue stay there: disabling the queue fails
// them. Only one Run may be active per queue.
func (a *Applier) Run(ctx context.Context) {
	var pl pipeline
	defer pl.waitAll()
	for {
		item, err := a.queue.dequeue(ctx)
		if err != nil {
			return
		}
		a.apply(ctx, &pl, item)
	}
}

// apply checks one plan and answers it or dispatches its raft write.
func (a *Applier) apply(ctx context.Context, pl *pipeline, item *pending) {
	p := item.plan
	pl.settle()
	snap, err := a.snapshot(ctx, max(pl.lastIndex, p.GetSnapshotIndex()))
	if err != nil {
		item.future.respond(nil, a.failure(ctx, p, err))
		return
	}
	ver := verifyPlan(snap, p, pl.flying, a.cfg.AllocCIDR, a.cfg.Usage)
	if a.verified != nil {
		a.verified(p)
	}
	a.record(p, ver)
	entry := a.entry(p, ver)
	write := len(entry.GetAllocations()) > 0 || len(entry.GetStops()) > 0 ||
		entry.GetDeployment() != nil || len(entry.GetDeploymentUpdates()) > 0 || len(entry.GetEvals()) > 0
	if len(ver.rejected) > 0 {
		// The refresh index must cover every write this plan was checked
		// against.
		pl.waitAll()
	}
	result := planResult(snap, ver, pl.lastIndex)
	result.EvalUpdated = len(entry.GetEvals()) > 0
	if !write {
		item.future.respond(result, nil)
		return
	}
	if len(pl.inflight) >= MaxWritesInFlight {
		pl.waitOldest()
	}
	if ctx.Err() != nil {
		item.future.respond(nil, a.failure(ctx, p, ctx.Err()))
		return
	}
	pl.add(a.dispatch(ctx, p, item.future, entry, result))
}

// planResult is the answer to a checked plan, but for the raft index of
// its write: the node plans to commit, and the nodes dropped with the index
// the worker must refresh to. With nodes dropped, every write the plan was
// checked against must be done, and committed the latest at lastIndex.
func planResult(snap *state.Snapshot, ver verification, lastIndex uint64) *droverv1.PlanResult {
	result := &droverv1.PlanResult{}
	for _, np := range ver.accepted {
		if len(np.GetAlternates()) > 0 {
			// The worker has no use for them back.
			np = &droverv1.NodePlan{NodeId: np.GetNodeId(), Allocations: np.GetAllocations(), Stops: np.GetStops()}
		}
		if len(np.GetAllocations()) > 0 || len(np.GetStops()) > 0 {
			result.NodePlans = append(result.NodePlans, np)
		}
	}
	result.CommittedNodes = uint32(len(result.NodePlans))
	if len(ver.rejected) == 0 {
		return result
	}
	for _, r := range ver.rejected {
		result.RejectedNodeIds = append(result.RejectedNodeIds, r.nodeID)
	}
	// The worker must see at least the state the plan was checked against.
	result.RefreshIndex = max(snap.Index(), lastIndex)
	return result
}

// snapshot returns the newest state, once it holds minIndex.
func (a *Applier) snapshot(ctx context.Context, minIndex uint64) (*state.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.SnapshotWait)
	defer cancel()
	return a.store.SnapshotMinIndex(ctx, minIndex)
}

// failure wraps why a plan was not applied; once ctx has ended the plan
// was abandoned with leadership, which ErrDisabled tells the worker.
func (a *Applier) failure(ctx context.Context, p *droverv1.Plan, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("plan of eval %s: %w: %w", p.GetEvalId(), ErrDisabled, err)
	}
	return fmt.Errorf("plan of eval %s: %w", p.GetEvalId(), err)
}

// record logs and counts the rejected nodes of a plan, its replaced
// addresses and ports, and its relocated placements.
func (a *Applier) record(p *droverv1.Plan, ver verification) {
	if ver.portsReplaced > 0 {
		a.portsReplaced.Add(uint64(ver.portsReplaced))
		a.cfg.Logger.Debug("plan dynamic ports replaced", "eval_id", p.GetEvalId(), "count", ver.portsReplaced)
	}
	if ver.relocated > 0 {
		a.placementsRelocated.Add(uint64(ver.relocated))
		a.cfg.Logger.Debug("plan placements relocated", "eval_id", p.GetEvalId(), "count", ver.relocated)
	}
	if ver.replaced > 0 {
		a.addressesReplaced.Add(uint64(ver.replaced))
		a.cfg.Logger.Debug("plan addresses replaced", "eval_id", p.GetEvalId(), "count", ver.replaced)
	}
	if len(ver.rejected) == 0 {
		return
	}
	a.partiallyRejected.Add(1)
	a.nodesRejected.Add(uint64(len(ver.rejected)))
	for _, r := range ver.rejected {
		a.cfg.Logger.Debug("plan node rejected", "eval_id", p.GetEvalId(), "node_id", r.nodeID, "reason", r.reason)
	}
}

// entry builds the raft entry of the accepted node plans. The outcome of
// the plan's evaluation goes with them only when no node was dropped: the
// worker plans again after a partial commit, and only its last plan
// finishes the evaluation. Every release applies the entry's evaluations,
// so this needs no version gate.
func (a *Applier) entry(p *droverv1.Plan, ver verification) *droverv1.PlanResultEntry {
	e := &droverv1.PlanResultEntry{EvalId: p.GetEvalId(), AppliedAt: a.cfg.Now(),
		Deployment: p.GetDeployment(), DeploymentUpdates: p.GetDeploymentUpdates()}
	for _, np := range ver.accepted {
		e.Allocations = append(e.Allocations, np.GetAllocations()...)
		e.Stops = append(e.Stops, np.GetStops()...)
	}
	if ev := p.GetEvalUpdate(); ev != nil && len(ver.rejected) == 0 {
		e.Evals = []*droverv1.Evaluation{ev}
	}
	return e
}

// dispatch starts the raft write of a plan's entry and answers the plan
// when it is done.
func (a *Applier) dispatch(ctx context.Context, p *droverv1.Plan, f *Future, e *droverv1.PlanResultEntry, result *droverv1.PlanResult) *commit {
	c := &commit{allocs: e.GetAllocations(), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		index, err := a.raft.CommitPlan(ctx, e)
		if err != nil {
			f.respond(nil, a.failure(ctx, p, fmt.Errorf("commit: %w", err)))
			return
		}
		c.index = index
		a.applied.Add(1)
		result.AllocIndex = index
		if result.RefreshIndex != 0 {
			// The worker's retry must see the part of its plan that was
			// committed, or it would place it again.
			result.RefreshIndex = max(result.RefreshIndex, index)
		}
		f.respond(result, nil)
	}()
	return c
}
