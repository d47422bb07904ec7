// Package gc plans garbage collection: from a read-only state snapshot it
// decides which nodes, allocations, evaluations, jobs and job versions can
// be deleted, and cuts the deletions into raft entries of bounded size.
//
// The planner writes nothing. The leader proposes its entries
// (MessageTypeGC) and the state store checks every object again when it
// applies them, so a plan made on a slightly stale snapshot is harmless;
// the planner still never proposes an object the rules keep.
package gc

import (
	"time"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// DefaultBatchSize is the most ids (all id lists of one entry together) in
// one GCEntry, so that a large collection never makes one huge raft entry.
const DefaultBatchSize = 1000

// KeepJobVersions is how many of the newest versions of a job that stays
// are always kept, so operators can inspect and revert recent changes.
const KeepJobVersions = 6

// Thresholds are the ages after which objects are collected. A zero (or
// negative) threshold collects regardless of age.
type Thresholds struct {
	// Node: a down node whose allocations are all terminal, measured from
	// its last status change.
	Node time.Duration
	// Eval: a terminal evaluation (and its terminal allocations), measured
	// from its last change.
	Eval time.Duration
	// BatchEval: the same for evaluations and allocations of batch jobs,
	// whose finished work the batch scheduler still counts.
	BatchEval time.Duration
	// Job: a stopped job, or a batch job that is dead, measured from its
	// submit time.
	Job time.Duration
}

// DefaultThresholds returns the default thresholds: Nomad's, where both
// have the knob.
func DefaultThresholds() Thresholds {
	return Thresholds{
		Node:      24 * time.Hour,
		Eval:      time.Hour,
		BatchEval: 24 * time.Hour,
		Job:       4 * time.Hour,
	}
}

// Force returns thresholds of zero: `drover system gc` collects everything
// collectable now, whatever its age.
func Force() Thresholds { return Thresholds{} }

// Plan returns the entries that delete what is collectable in snap at now,
// none larger than batchSize ids in total (DefaultBatchSize when batchSize
// is not positive), in an order safe to apply one by one: every allocation
// comes no later than the evaluations, nodes, job versions and jobs it
// refers to, and jobs come last. Ids are sorted, so the same state gives
// the same entries. Plan returns nil when there is nothing to collect.
func Plan(snap *state.Snapshot, th Thresholds, now time.Time, batchSize int) []*droverv1.GCEntry {
	return collect(snap, th, now.UnixNano()).entries(batchSize)
}
