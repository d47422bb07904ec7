package scheduler

import (
	"cmp"
	"maps"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// reconcileSystem decides a system job's changes: one allocation of each
// task group on every node in eligible (ready, eligible, in the job's
// datacenters), named "<job>.<group>[0]".
//
// tainted holds the other nodes hosting the job's allocations, nil for a
// node that is gone. What happens to an allocation there depends on the
// node: lost if it is down or gone; unknown for a while if it is
// disconnected and the group tolerates it; stopped if the drainer marked
// it to migrate (once the rest of a draining node's work has left) or the
// node is ready and eligible but no longer one the job may use; left alone if it is initializing or
// ineligible, since those states are passing or an operator's choice not
// to place new work. An allocation on a node in neither map is stopped.
func reconcileSystem(job *droverv1.Job, jobVersion func(uint64) *droverv1.Job, allocs []*droverv1.Allocation,
	eligible map[string]*droverv1.Node, tainted map[string]*droverv1.Node, evalID string, now int64) *reconcileResult {
	res := &reconcileResult{desired: make(map[string]*groupDesired)}
	groups := allocsByGroup(allocs)
	gone := func(id string) bool {
		n, ok := tainted[id]
		return ok && nodeGone(n)
	}
	if job == nil || job.GetStop() {
		for _, name := range slices.Sorted(maps.Keys(groups)) {
			stopGroup(res, name, groups[name], gone, allocJobStopped)
		}
		return res
	}
	s := &systemReconciler{
		job: job, jobVersion: jobVersion, eligible: eligible, tainted: tainted,
		links: newAllocLinks(allocs), later: &followups{}, evalID: evalID, now: now,
	}
	s.nodeIDs = slices.Sorted(maps.Keys(eligible))
	for _, tg := range job.GetTaskGroups() {
		s.reconcileGroup(newGroupChanges(res, tg.GetName(), groups[tg.GetName()]), tg)
		delete(groups, tg.GetName())
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		stopGroup(res, name, groups[name], gone, allocNotNeeded)
	}
	res.followupEvals = s.later.evals(job, evalID, now)
	return res
}

// systemReconciler holds what reconciling a system job's groups shares.
type systemReconciler struct {
	job        *droverv1.Job
	jobVersion func(uint64) *droverv1.Job
	eligible   map[string]*droverv1.Node
	tainted    map[string]*droverv1.Node
	nodeIDs    []string // eligible, sorted
	links      *allocLinks
	later      *followups
	evalID     string
	now        int64
}

// reconcileGroup keeps one current allocation of the group on every
// eligible node.
func (s *systemReconciler) reconcileGroup(ch *groupChanges, tg *droverv1.TaskGroup) {
	live := make(map[string][]*droverv1.Allocation)
	ended := make(map[string]*droverv1.Allocation)
	for _, a := range ch.allocs {
		switch {
		case a.ServerTerminal() || a.ClientTerminal():
			s.noteEnded(ended, ch, a)
		case s.eligible[a.GetNodeId()] == nil:
			s.offEligible(ch, tg, a)
		case disconnectExpired(a, tg, s.now, s.evalID):
			ch.stop(a, allocLost, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST)
		default:
			live[a.GetNodeId()] = append(live[a.GetNodeId()], a)
		}
	}
	for _, id := range s.nodeIDs {
		as := live[id]
		if len(as) == 0 {
			ch.place(placement{name: allocName(s.job.GetId(), tg.GetName(), 0), group: tg, node: id, previous: ended[id]})
			continue
		}
		keep := s.keepOne(ch, as)
		s.reconnect(ch, keep)
		s.update(ch, tg, keep)
	}
	ch.finish()
}

// noteEnded remembers, per node, the newest ended allocation that nothing
// replaced yet, to link a new placement there to it; and frees a stopped
// allocation whose node is gone.
func (s *systemReconciler) noteEnded(ended map[string]*droverv1.Allocation, ch *groupChanges, a *droverv1.Allocation) {
	n, known := s.tainted[a.GetNodeId()]
	freeStoppedLost(ch, a, known && nodeGone(n))
	if s.links.replaced(a) {
		return
	}
	if prev := ended[a.GetNodeId()]; prev == nil || prev.GetCreateTime() < a.GetCreateTime() {
		ended[a.GetNodeId()] = a
	}
}

// offEligible handles a live allocation on a node the job may not place
// on now; see reconcileSystem.
func (s *systemReconciler) offEligible(ch *groupChanges, tg *droverv1.TaskGroup, a *droverv1.Allocation) {
	n, known := s.tainted[a.GetNodeId()]
	switch {
	case !known:
		ch.stop(a, allocNotNeeded, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
	case nodeGone(n):
		ch.stop(a, allocLost, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST)
	case disconnectExpired(a, tg, s.now, s.evalID):
		ch.stop(a, allocLost, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST)
	case n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_DISCONNECTED:
		if tg.GetMaxClientDisconnect().AsDuration() > 0 &&
			(isRunning(a) || a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN) {
			markDisconnected(ch, s.later, a, tg, s.now, nil)
			return
		}
		ch.stop(a, allocLost, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST)
	case a.GetDesiredTransition().GetMigrate():
		// A drain's turn for system work comes when the rest has left.
		ch.stop(a, allocMigrating, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
	case n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_INITIALIZING,
		n.GetSchedulingEligibility() == droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE:
		// Passing, or the operator's choice: existing work stays.
	default:
		ch.stop(a, allocNotNeeded, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
	}
}

// keepOne keeps one of a node's live allocations of the group, preferring
// the current job version, then a running one, then the newest, and stops
// the rest.
func (s *systemReconciler) keepOne(ch *groupChanges, as []*droverv1.Allocation) *droverv1.Allocation {
	if len(as) == 1 {
		return as[0]
	}
	best := slices.MaxFunc(as, func(a, b *droverv1.Allocation) int {
		return cmp.Or(
			boolCmp(a.GetJobVersion() == s.job.GetVersion(), b.GetJobVersion() == s.job.GetVersion()),
			boolCmp(isRunning(a), isRunning(b)),
			cmp.Compare(a.GetCreateTime(), b.GetCreateTime()),
			cmp.Compare(a.GetId(), b.GetId()))
	})
	for _, a := range as {
		if a != best {
			ch.stop(a, allocNotNeeded, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
		}
	}
	return best
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// reconnect records that an allocation whose node came back is running
// again. There is nothing to choose: no replacement was placed elsewhere.
func (s *systemReconciler) reconnect(ch *groupChanges, a *droverv1.Allocation) {
	if !needsReconnect(a) || !isRunning(a) {
		return
	}
	ch.reconnected(a)
	markReconnected(ch.copyOf(a), s.now)
}

// update moves the node's allocation to the current job version, in place
// or by replacing it on the same node.
func (s *systemReconciler) update(ch *groupChanges, tg *droverv1.TaskGroup, a *droverv1.Allocation) {
	switch allocUpdate(a, s.job, s.jobVersion) {
	case updateDestructive:
		ch.destructive(a, placement{name: a.GetName(), group: tg, node: a.GetNodeId(), previous: a})
	case updateInPlace:
		ch.inPlace(a, s.job, s.evalID)
	}
}
