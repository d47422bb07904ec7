// Package invariant checks the safety properties of placements on a state
// snapshot: no node holds more than it offers, no port or address is held
// twice, no job runs more allocations than it asks for. Every test that
// schedules work can call Check on the state it ends with (or any state on
// the way: these must hold at every index).
package invariant

import (
	"fmt"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// Check returns every violation found in snap, nil when there is none.
func Check(snap *state.Snapshot) []error {
	var errs []error
	errs = append(errs, nodesWithinCapacity(snap)...)
	errs = append(errs, addressesUnique(snap)...)
	errs = append(errs, jobsWithinCount(snap)...)
	return errs
}

// nodesWithinCapacity checks every node's allocations that hold resources
// against the node: cpu, memory, disk, ports (reserved ones included).
func nodesWithinCapacity(snap *state.Snapshot) []error {
	var errs []error
	for n := range snap.Nodes() {
		allocs, _ := snap.AllocsByNode(n.GetId())
		if ok, reason, _ := fit.AllocsFit(n, allocs); !ok {
			errs = append(errs, fmt.Errorf("node %s over its resources at index %d: %s", n.GetId(), snap.Index(), reason))
		}
	}
	return errs
}

// addressesUnique checks that no address of the allocation network is held
// by two allocations anywhere in the cluster.
func addressesUnique(snap *state.Snapshot) []error {
	var errs []error
	holder := make(map[string]string)
	for a := range snap.Allocs() {
		ip := a.GetResources().GetIp()
		if ip == "" || !fit.Holds(a) {
			continue
		}
		if other, dup := holder[ip]; dup {
			errs = append(errs, fmt.Errorf("address %s held by allocations %s and %s at index %d", ip, other, a.GetId(), snap.Index()))
			continue
		}
		holder[ip] = a.GetId()
	}
	return errs
}

// jobsWithinCount checks that no task group has more allocations that the
// servers want running (desired run, not client-terminal) than its count,
// and that a system job has at most one per node. A job's count may have
// just been lowered by an update whose evaluation has not yet run, so the
// bound is the largest count among the job versions the allocations belong
// to and the current one: a plan stops and places in one raft entry, so
// scheduling itself never needs more.
func jobsWithinCount(snap *state.Snapshot) []error {
	type groupNode struct{ group, node string }
	var errs []error
	for job := range snap.Jobs() {
		allocs, _ := snap.AllocsByJob(job.GetId())
		perGroup := make(map[string]int32)
		perNode := make(map[groupNode]int32)
		bound := make(map[string]int32)
		for _, tg := range job.GetTaskGroups() {
			bound[tg.GetName()] = tg.GetCount()
		}
		for _, a := range allocs {
			if a.GetDesiredStatus() != droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN || a.ClientTerminal() {
				continue
			}
			perGroup[a.GetTaskGroup()]++
			perNode[groupNode{a.GetTaskGroup(), a.GetNodeId()}]++
			if v := snap.JobVersion(job.GetId(), a.GetJobVersion()); v != nil {
				if tg := v.LookupTaskGroup(a.GetTaskGroup()); tg != nil {
					bound[tg.GetName()] = max(bound[tg.GetName()], tg.GetCount())
				}
			}
		}
		if job.GetType() == droverv1.JobType_JOB_TYPE_SYSTEM {
			for key, n := range perNode {
				if n > 1 {
					errs = append(errs, fmt.Errorf("system job %q group %q runs %d allocations on node %s at index %d", job.GetId(), key.group, n, key.node, snap.Index()))
				}
			}
			continue
		}
		for group, got := range perGroup {
			if got > bound[group] {
				errs = append(errs, fmt.Errorf("job %q group %q has %d allocations wanted running, count is %d, at index %d", job.GetId(), group, got, bound[group], snap.Index()))
			}
		}
	}
	return errs
}
