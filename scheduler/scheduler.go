// Package scheduler is drover's placement logic: it turns one evaluation
// into a plan. For each task group of the evaluation's job the reconciler
// compares the allocations that exist with what the job asks for and decides
// what to place, stop, update in place or replace; the placement stack then
// picks nodes: feasibility (status, eligibility, datacenter, constraints),
// resources through scheduler/fit, ranking by bin packing with anti-affinity
// and spread.
//
// The package talks to the rest of drover only through State (a read-only
// point-in-time view of the cluster) and Planner (submit a plan, write
// evaluations). It imports nothing of drover but proto, so it runs in unit
// tests and benchmarks against a state store without a server.
package scheduler

import (
	"context"
	"iter"
	"log/slog"
	"net/netip"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// State is the read-only view of the cluster a scheduler works from. Objects
// it returns are shared and immutable: clone before changing. The state
// store's Snapshot implements it.
type State interface {
	// Index is the raft index the view reflects.
	Index() uint64
	NodeByID(id string) *droverv1.Node
	// Nodes iterates over every node, in id order.
	Nodes() iter.Seq[*droverv1.Node]
	// NodesWithAllocs iterates over every node in id order, each with
	// what NodeAllocsShared returns for it.
	NodesWithAllocs() iter.Seq2[*droverv1.Node, []*droverv1.Allocation]
	JobByID(id string) *droverv1.Job
	// JobVersion returns one stored version of a job, or nil.
	JobVersion(id string, version uint64) *droverv1.Job
	// AllocsByJob returns the job's allocations (terminal ones included)
	// and the index of their last change.
	AllocsByJob(jobID string) ([]*droverv1.Allocation, uint64)
	// AllocsByNode returns the node's allocations (terminal ones included)
	// and the index of their last change.
	AllocsByNode(nodeID string) ([]*droverv1.Allocation, uint64)
	// NodeAllocsShared returns what AllocsByNode does without the index
	// and without copying: the stored row, read-only. A row that changes
	// is a new array, so the same first element address and length mean
	// the same allocations (the usage cache keys on that).
	NodeAllocsShared(nodeID string) []*droverv1.Allocation
	// AllocIPHeld reports whether a non-client-terminal allocation holds
	// the address.
	AllocIPHeld(ip string) bool
	// NeverUsedIP and ReleasedIPs tell which free addresses were never
	// held and when the others were released (see ippool.Source).
	NeverUsedIP(from, last netip.Addr) (netip.Addr, bool)
	ReleasedIPs() func() (addr netip.Addr, index uint64, ok bool)
	EvalByID(id string) *droverv1.Evaluation
	// LatestDeployment returns the job's newest deployment, or nil.
	LatestDeployment(jobID string) *droverv1.Deployment
}

// Planner is how a scheduler changes the cluster. The worker implements it
// over the leader's plan queue and broker.
type Planner interface {
	// SubmitPlan hands a plan to the leader's plan applier and returns what
	// was committed. When part of the plan was dropped, the returned State
	// is a view at least as new as the result's refresh index, to plan
	// again from; otherwise it is nil.
	SubmitPlan(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, State, error)
	// UpdateEval writes the new status of the evaluation being processed.
	UpdateEval(ctx context.Context, eval *droverv1.Evaluation) error
	// CreateEval writes a new evaluation: a blocked one, or a delayed
	// follow-up.
	CreateEval(ctx context.Context, eval *droverv1.Evaluation) error
	// ReblockEval puts back the blocked evaluation being processed, which
	// still cannot place everything.
	ReblockEval(ctx context.Context, eval *droverv1.Evaluation) error
}

// Scheduler processes one evaluation.
type Scheduler interface {
	// Process reconciles the evaluation's job with the cluster, submits the
	// plan, and writes the evaluation's outcome (complete, blocked
	// follow-up, failed) through the planner. An error means the evaluation
	// should be retried (nacked).
	Process(ctx context.Context, eval *droverv1.Evaluation) error
}

// Config tunes the schedulers.
type Config struct {
	// AllocCIDR is the network allocations take their addresses from. An
	// invalid (zero) prefix means allocations get no address.
	AllocCIDR netip.Prefix
	// MaxCandidates bounds how many feasible nodes are ranked for one
	// placement on a large cluster (0 means DefaultMaxCandidates).
	MaxCandidates int
	// Logger receives the scheduler's debug logs; nil discards them.
	Logger *slog.Logger
	// Now returns the current time in unix nanoseconds; nil means the
	// wall clock. Tests fix it.
	Now func() int64
	// Seed seeds placement randomness (node order, port and address
	// choice); zero means a random seed per evaluation.
	Seed uint64
	// SubmitEmptyPlans submits a plan that changes nothing too, so that a
	// planner that records plans sees every decision (JobService.Plan).
	SubmitEmptyPlans bool
	// Deployments reports whether new job versions may be rolled out
	// through deployments (every server knows them); nil means never.
	Deployments func() bool
	// PlacementAlternates is how many other ranked nodes a new placement
	// names besides its own (NodePlan.alternates), for the plan applier to use
	// when a plan applied meanwhile filled the node; 0 names none.
	// Evaluations scheduled at the same time rank the same fullest nodes
	// first, so without them the later plan loses every node the earlier
	// one filled and its worker plans again.
	PlacementAlternates int
	// UsageCache, shared by every scheduler of a server, keeps each
	// node's usage between passes; nil means every pass builds the usage
	// of each node it visits from the node's allocations.
	UsageCache *UsageCache
}

// DefaultMaxCandidates is how many feasible nodes are ranked per placement
// unless configured otherwise.
const DefaultMaxCandidates = 64
