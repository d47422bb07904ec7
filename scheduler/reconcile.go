package scheduler

import (
	"cmp"
	"maps"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Desired descriptions of the stops the reconcilers make.
const (
	allocNotNeeded   = "alloc not needed due to job update"
	allocJobStopped  = "alloc not needed as job is stopped"
	allocLost        = "alloc is lost since its node is down"
	allocMigrating   = "alloc is being migrated"
	allocUpdating    = "alloc is being updated due to job update"
	allocReconnected = "alloc not needed due to disconnected client reconnect"
	// allocUnhealthy stops an allocation of a deployment that turned
	// unhealthy, to replace it.
	allocUnhealthy = "alloc is unhealthy in its deployment"
	// allocCanaryUnpromoted stops a canary whose deployment ended unpromoted.
	allocCanaryUnpromoted = "alloc was a canary of a deployment that ended unpromoted"
)

// reconcileInput is what the service/batch reconciler compares: a job and
// every allocation it has.
type reconcileInput struct {
	// job is the current job; nil (deleted) or stopped means stop
	// everything.
	job *droverv1.Job
	// jobVersion returns an older version of the job, to compare specs; it
	// may return nil (then allocations of that version are replaced).
	jobVersion func(version uint64) *droverv1.Job
	// allocs is every allocation of the job: all versions, terminal ones
	// included.
	allocs []*droverv1.Allocation
	// nodes holds the nodes hosting those allocations; a missing key or a
	// nil value is a node that is gone.
	nodes map[string]*droverv1.Node
	// evalByID looks up an evaluation (State.EvalByID), to tell whether
	// the follow-up stamped on an allocation has already run or was
	// canceled, so that its work is done now or scheduled again. Optional:
	// without it a stamped follow-up is trusted to be still pending.
	evalByID func(id string) *droverv1.Evaluation
	// evalID is the evaluation being processed. A delayed follow-up is
	// recognised by its id, so no rule depends on evalTriggeredBy.
	evalID          string
	evalTriggeredBy droverv1.EvalTrigger
	// now is the current time in unix nanoseconds.
	now int64

	// deployment is the job's latest deployment, nil if it never had one.
	deployment *droverv1.Deployment
	// deployments says whether new versions may be rolled out through
	// deployments: every server knows them.
	deployments bool
	// newDeploymentID names a deployment this reconciliation creates.
	newDeploymentID func() string
	// evalPriority is the priority the evaluations of a new deployment
	// take.
	evalPriority int32
}

// reconcileResult is what reconciliation decided for a job.
type reconcileResult struct {
	// place lists the new allocations wanted.
	place []placement
	// stop lists existing allocations to stop.
	stop []allocStop
	// inplace holds copies of existing allocations moved to the current
	// job version in place: same id, node and resources.
	inplace []*droverv1.Allocation
	// destructive lists allocations replaced because their job changed:
	// the old one stops, a new one is placed.
	destructive []destructiveUpdate
	// attributeUpdates holds copies of existing allocations with only
	// server bookkeeping changed: a follow-up evaluation stamped, a
	// disconnect or reconnect recorded.
	attributeUpdates []*droverv1.Allocation
	// followupEvals are delayed evaluations to create (before the plan is
	// submitted, so that a stamped id always names an existing
	// evaluation).
	followupEvals []*droverv1.Evaluation
	// desired counts the decisions per task group, for status reporting.
	desired map[string]*groupDesired
	// deployment is a deployment to create; deploymentUpdates are status
	// changes of existing ones (see deployment.go).
	deployment        *droverv1.Deployment
	deploymentUpdates []*droverv1.DeploymentStatusUpdate
}

// placement asks for one new allocation.
type placement struct {
	name  string
	group *droverv1.TaskGroup
	// previous is the allocation this one replaces, or nil.
	previous *droverv1.Allocation
	// reschedule says previous failed: the new allocation's tracker gets
	// rescheduleTracker(previous, now, delay).
	reschedule bool
	// delay is the reschedule policy's delay for this attempt.
	delay int64
	// lost says previous was lost with its node.
	lost bool
	// node is the node the allocation must go to; set only by the system
	// reconciler.
	node string
	// deploymentID is the deployment the new allocation joins, if any.
	deploymentID string
	// canary places the allocation as a canary of that deployment.
	canary bool
	// keepPrevious says previous was stopped by this plan only to make way
	// for this one: if no node takes it, previous keeps running.
	keepPrevious bool
}

// allocStop asks for an existing allocation to stop.
type allocStop struct {
	alloc       *droverv1.Allocation
	desired     droverv1.AllocDesiredStatus
	description string
	// clientStatus is LOST when the allocation's node is gone, else
	// UNSPECIFIED (unchanged).
	clientStatus droverv1.AllocClientStatus
	// followup, if set, receives the id of the delayed evaluation the stop
	// is to record on the allocation once follow-ups are made.
	followup *droverv1.Allocation
}

// destructiveUpdate replaces an allocation with one for the current job
// version.
type destructiveUpdate struct {
	stop  allocStop
	place placement
	// surge keeps the allocation running beside its replacement: it is
	// stopped once the replacement is healthy.
	surge bool
}

// groupDesired counts what reconciliation decided for one task group.
// Every existing allocation of the group is counted once, under stop,
// inplace, destructive, reconnect or ignore; place counts new allocations
// other than those of destructive updates.
type groupDesired struct {
	place, stop, inplace, destructive, ignore, reconnect, migrate, canary int
}

// desiredUpdates turns the counts into the plan's annotations.
func (r *reconcileResult) desiredUpdates() map[string]*droverv1.DesiredUpdates {
	out := make(map[string]*droverv1.DesiredUpdates, len(r.desired))
	for group, d := range r.desired {
		out[group] = &droverv1.DesiredUpdates{
			Place: int32(d.place), Stop: int32(d.stop), InPlaceUpdate: int32(d.inplace),
			DestructiveUpdate: int32(d.destructive), Ignore: int32(d.ignore),
			Reconnect: int32(d.reconnect), Migrate: int32(d.migrate), Canary: int32(d.canary),
		}
	}
	return out
}

// reconcile decides, for each task group of a service or batch job, what
// to place, stop and update so that the group runs count allocations of
// the current job version.
func reconcile(in reconcileInput) *reconcileResult {
	res := &reconcileResult{desired: make(map[string]*groupDesired)}
	groups := allocsByGroup(in.allocs)
	gone := func(id string) bool { return nodeGone(in.nodes[id]) }
	if in.job == nil || in.job.GetStop() {
		cancelDeployment(&in, res, "Cancelled because job is stopped")
		for _, name := range slices.Sorted(maps.Keys(groups)) {
			stopGroup(res, name, groups[name], gone, allocJobStopped)
		}
		return res
	}
	links := newAllocLinks(in.allocs)
	later := &followups{}
	d := currentDeployment(&in, res, groups)
	var rollouts []*groupReconciler
	for _, tg := range in.job.GetTaskGroups() {
		g := newGroupReconciler(&in, tg, groups[tg.GetName()], links, later, res)
		g.deployment = d
		g.reconcile()
		if g.rolledOut() {
			rollouts = append(rollouts, g)
		}
		delete(groups, tg.GetName())
	}
	completeDeployment(res, d, rollouts)
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		stopGroup(res, name, groups[name], gone, allocNotNeeded)
	}
	res.followupEvals = later.evals(in.job, in.evalID, in.now)
	return res
}

// stopGroup stops every allocation of a group that is neither stopped nor
// finished: the job was stopped or the group removed from it.
func stopGroup(res *reconcileResult, group string, allocs []*droverv1.Allocation, gone func(nodeID string) bool, description string) {
	ch := newGroupChanges(res, group, allocs)
	for _, a := range allocs {
		if freeStoppedLost(ch, a, gone(a.GetNodeId())) || a.ServerTerminal() || a.ClientTerminal() {
			continue
		}
		cs := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED
		if gone(a.GetNodeId()) {
			cs = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
		}
		ch.stop(a, description, cs)
	}
	ch.finish()
}

// freeStoppedLost marks an allocation the servers already stopped as lost
// when its node is gone: no agent will ever report it stopped, and until it
// is client-terminal it holds its resources and address. It reports
// whether it did.
func freeStoppedLost(ch *groupChanges, a *droverv1.Allocation, gone bool) bool {
	if !gone || !a.ServerTerminal() || a.ClientTerminal() {
		return false
	}
	description := a.GetDesiredDescription()
	if description == "" {
		description = allocLost
	}
	ch.res.stop = append(ch.res.stop, allocStop{
		alloc:        a,
		desired:      a.GetDesiredStatus(),
		description:  description,
		clientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST,
	})
	ch.acted[a.GetId()] = actionStop
	return true
}

// nodeGone reports whether allocations on the node are lost: the node is
// down or no longer exists.
func nodeGone(n *droverv1.Node) bool {
	return n == nil || n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_DOWN
}

// nodeReady reports whether the plan applier accepts updates of
// allocations on the node.
func nodeReady(n *droverv1.Node) bool {
	return n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_READY
}

// allocsByGroup splits allocations by task group, each group's in name
// order.
func allocsByGroup(allocs []*droverv1.Allocation) map[string][]*droverv1.Allocation {
	groups := make(map[string][]*droverv1.Allocation)
	for _, a := range allocs {
		groups[a.GetTaskGroup()] = append(groups[a.GetTaskGroup()], a)
	}
	for _, as := range groups {
		slices.SortFunc(as, byNameIndex)
	}
	return groups
}

// byNameIndex orders allocations by name index, then creation, then id.
func byNameIndex(a, b *droverv1.Allocation) int {
	ia, _ := allocNameIndex(a.GetName())
	ib, _ := allocNameIndex(b.GetName())
	return cmp.Or(cmp.Compare(ia, ib), cmp.Compare(a.GetCreateTime(), b.GetCreateTime()), cmp.Compare(a.GetId(), b.GetId()))
}

// allocLinks indexes the replacement links among a job's allocations.
type allocLinks struct {
	byID       map[string]*droverv1.Allocation
	replacedBy map[string][]*droverv1.Allocation
}

func newAllocLinks(allocs []*droverv1.Allocation) *allocLinks {
	l := &allocLinks{
		byID:       make(map[string]*droverv1.Allocation, len(allocs)),
		replacedBy: make(map[string][]*droverv1.Allocation),
	}
	for _, a := range allocs {
		l.byID[a.GetId()] = a
		if p := a.GetPreviousAllocation(); p != "" {
			l.replacedBy[p] = append(l.replacedBy[p], a)
		}
	}
	return l
}

// replaced reports whether another allocation has replaced a.
func (l *allocLinks) replaced(a *droverv1.Allocation) bool {
	return a.GetNextAllocation() != "" || len(l.replacedBy[a.GetId()]) > 0
}

// chain returns the allocations that replaced a, directly or through
// others, nearest first.
func (l *allocLinks) chain(a *droverv1.Allocation) []*droverv1.Allocation {
	seen := map[string]bool{a.GetId(): true}
	var out []*droverv1.Allocation
	queue := []*droverv1.Allocation{a}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		next := l.replacedBy[cur.GetId()]
		if n := l.byID[cur.GetNextAllocation()]; n != nil {
			next = append(slices.Clip(next), n)
		}
		for _, n := range next {
			if seen[n.GetId()] {
				continue
			}
			seen[n.GetId()] = true
			out = append(out, n)
			queue = append(queue, n)
		}
	}
	return out
}
