// Package drain decides, for the leader's drainer, which allocations may
// leave draining nodes now and which drains are over.
//
// A drain moves a node's work in turns, so that draining never takes more of
// a service group out of service than the group's migrate max_parallel
// allows: an allocation on a draining node is marked to migrate only while
// at least count - max_parallel of its group run elsewhere or unmarked.
// Batch work is left to finish and system work leaves last; at the deadline
// everything still there is marked at once.
package drain

import (
	"cmp"
	"maps"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// State is the read view the planner needs; *state.Snapshot is one.
type State interface {
	AllocsByNode(nodeID string) ([]*droverv1.Allocation, uint64)
	AllocsByJob(jobID string) ([]*droverv1.Allocation, uint64)
	JobByID(id string) *droverv1.Job
}

// Plan is what the drainer must write.
type Plan struct {
	// Migrate lists the allocations to mark for migration now, in id order.
	// The jobs they belong to need an evaluation each.
	Migrate []*droverv1.Allocation
	// Done lists the draining nodes whose drain is over: nothing the drain
	// must move still runs there, or the deadline has passed and everything
	// left has been marked.
	Done []*droverv1.Node
}

// Decide plans one round of the drains of the given nodes (all of them
// draining) at now, in Unix nanoseconds.
func Decide(st State, draining []*droverv1.Node, now int64) Plan {
	d := &decider{st: st, now: now, marked: make(map[string]*droverv1.Allocation), groups: make(map[groupKey][]*droverv1.Allocation)}
	for _, n := range draining {
		if d.node(n) {
			d.plan.Done = append(d.plan.Done, n)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(d.groups), groupKey.compare) {
		d.serviceGroup(k, d.groups[k])
	}
	for _, id := range slices.Sorted(maps.Keys(d.marked)) {
		d.plan.Migrate = append(d.plan.Migrate, d.marked[id])
	}
	return d.plan
}

// groupKey names a task group of a job.
type groupKey struct{ job, group string }

func (k groupKey) compare(o groupKey) int {
	return cmp.Or(cmp.Compare(k.job, o.job), cmp.Compare(k.group, o.group))
}

type decider struct {
	st   State
	now  int64
	plan Plan
	// marked holds the allocations to mark, by id.
	marked map[string]*droverv1.Allocation
	// groups holds the service allocations on draining nodes that wait for
	// their group's turn.
	groups map[groupKey][]*droverv1.Allocation
}

// node sorts the allocations on one draining node into marked now, waiting
// for their group's turn, or left alone, and reports whether the drain is
// over.
func (d *decider) node(n *droverv1.Node) bool {
	ds := n.GetDrainStrategy()
	forced := ds.GetDeadline() > 0 && d.now >= ds.GetDeadline()
	allocs, _ := d.st.AllocsByNode(n.GetId())
	var system []*droverv1.Allocation
	// left: anything the drain must see gone is still on the node;
	// othersLeft: some of it is not system work; unmarkedLeft: some of it
	// still waits for a decision to move.
	left, othersLeft, unmarkedLeft := false, false, false
	for _, a := range allocs {
		if a.ClientTerminal() {
			continue
		}
		job := d.st.JobByID(a.GetJobId())
		isSystem := job.GetType() == droverv1.JobType_JOB_TYPE_SYSTEM
		if isSystem && ds.GetIgnoreSystemJobs() {
			continue // the drain leaves it, even past the deadline
		}
		left = true
		if !isSystem {
			othersLeft = true
		}
		if !movable(a, job) {
			continue // the schedulers are already stopping it
		}
		unmarkedLeft = true
		switch {
		case forced:
			d.mark(a)
		case isSystem:
			system = append(system, a)
		case job.GetType() == droverv1.JobType_JOB_TYPE_SERVICE:
			k := groupKey{a.GetJobId(), a.GetTaskGroup()}
			d.groups[k] = append(d.groups[k], a)
		default:
			// Batch work finishes where it runs, unless the deadline comes.
		}
	}
	if !othersLeft {
		// System work leaves once everything else has.
		for _, a := range system {
			d.mark(a)
		}
	}
	if forced {
		// Over once the marks are written, on the next round.
		return !unmarkedLeft
	}
	return !left
}

// movable reports whether an allocation still waits for a decision to move
// it: its job wants it running and nobody has asked it to move yet.
func movable(a *droverv1.Allocation, job *droverv1.Job) bool {
	return job != nil && !job.GetStop() && !a.ServerTerminal() && !a.GetDesiredTransition().GetMigrate()
}

// serviceGroup marks as many of a service group's waiting allocations as
// its migrate max_parallel allows. Allocations that are not running serve
// nothing and move at once; running ones move only while the group keeps
// count - max_parallel running allocations that nobody is moving.
func (d *decider) serviceGroup(k groupKey, waiting []*droverv1.Allocation) {
	job := d.st.JobByID(k.job)
	tg := job.LookupTaskGroup(k.group)
	if tg == nil {
		// The group left the job; the schedulers stop its allocations.
		return
	}
	maxParallel := int32(1)
	if m := tg.GetMigrate(); m != nil {
		maxParallel = m.GetMaxParallel()
	}
	all, _ := d.st.AllocsByJob(k.job)
	healthy := int32(0)
	for _, a := range all {
		if a.GetTaskGroup() == k.group && isRunning(a) && !a.ServerTerminal() && !a.GetDesiredTransition().GetMigrate() {
			healthy++
		}
	}
	budget := healthy - (tg.GetCount() - maxParallel)
	slices.SortFunc(waiting, func(a, b *droverv1.Allocation) int {
		return cmp.Or(cmp.Compare(a.GetName(), b.GetName()), cmp.Compare(a.GetId(), b.GetId()))
	})
	for _, a := range waiting {
		switch {
		case !isRunning(a):
			d.mark(a)
		case budget > 0:
			d.mark(a)
			budget--
		}
	}
}

func (d *decider) mark(a *droverv1.Allocation) { d.marked[a.GetId()] = a }

func isRunning(a *droverv1.Allocation) bool {
	return a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
}
