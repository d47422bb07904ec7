package scheduler

import (
	"cmp"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// groupReconciler reconciles one task group of a service or batch job.
//
// Existing allocations fall into sets. Counted toward the group's count:
// untainted (running where they should, or outdated and about to be
// updated), done (finished batch work), migrate (leaving a draining node,
// each replaced), failed (waiting for, or getting, a reschedule; a
// failed allocation holds its name until replaced) and awaitingStop (lost,
// but possibly still run by its unreachable agent until
// stop_after_client_disconnect has passed; each keeps its name until
// then). Not counted: lost (stopped, replaced while the group is under
// count), stoppedLost (stopped as lost earlier, their wait over: replaced
// while under count), disconnecting (on a disconnected node, replaced
// while under count) and everything ignored (stopped, finished service
// work, already replaced).
type groupReconciler struct {
	in    *reconcileInput
	job   *droverv1.Job
	group *droverv1.TaskGroup
	batch bool
	links *allocLinks
	later *followups
	ch    *groupChanges
	// handled marks allocations reconnect handling has decided about.
	handled map[string]bool

	untainted     []*droverv1.Allocation
	done          []*droverv1.Allocation
	migrate       []*droverv1.Allocation
	failed        []failedAlloc
	lost          []*droverv1.Allocation
	disconnecting []*droverv1.Allocation
	// awaitingStop are lost allocations that may still run on their
	// unreachable node until stop_after_client_disconnect has passed: they
	// keep their place, and are replaced only then. stoppedLost are
	// lost allocations stopped earlier whose wait is over.
	awaitingStop []*droverv1.Allocation
	stoppedLost  []*droverv1.Allocation

	// deployment is the job's current deployment (see deployment.go), nil
	// if none; outdated counts the replacements the rollout holds back.
	deployment *droverv1.Deployment
	outdated   int
	// canaries are the deployment's canaries not yet promoted, and surging
	// its surge replacements not yet healthy: both run beside the
	// allocations they will replace and do not count toward the group's
	// count until then.
	canaries []*droverv1.Allocation
	surging  []*droverv1.Allocation
	// unhealthy are allocations of the deployment its agents reported
	// unhealthy, each replaced now while the reschedule policy allows.
	unhealthy []*droverv1.Allocation
	// stoppedForUpdate counts allocations stopped for a replacement that
	// waits for them to be gone: the rollout counts each as in flight.
	stoppedForUpdate int
	// staggerUntil is when the group's stagger lets the rollout go on, 0
	// when it holds nothing back.
	staggerUntil int64
}

// failedAlloc is a failed allocation and what its reschedule policy says.
type failedAlloc struct {
	alloc    *droverv1.Allocation
	decision rescheduleDecision
}

func newGroupReconciler(in *reconcileInput, group *droverv1.TaskGroup, allocs []*droverv1.Allocation,
	links *allocLinks, later *followups, res *reconcileResult) *groupReconciler {
	return &groupReconciler{
		in:      in,
		job:     in.job,
		group:   group,
		batch:   in.job.GetType() == droverv1.JobType_JOB_TYPE_BATCH,
		links:   links,
		later:   later,
		ch:      newGroupChanges(res, group.GetName(), allocs),
		handled: make(map[string]bool),
	}
}

func (g *groupReconciler) reconcile() {
	g.ch.join = g.joinID()
	g.resolveReconnects()
	for _, a := range g.ch.allocs {
		if !g.handled[a.GetId()] {
			g.classify(a)
		}
	}
	g.splitRollout()
	g.scaleDown()
	g.update()
	g.followStagger()
	g.migrateAll()
	g.replace()
	g.delayFailed()
	g.ch.finish()
}

// classify puts an allocation into its set.
func (g *groupReconciler) classify(a *droverv1.Allocation) {
	switch {
	case a.ServerTerminal():
		if g.batch && a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE {
			g.done = append(g.done, a)
		}
		if waitsForReplacement(a, g.links) {
			g.stoppedForUpdate++
		}
		if freeStoppedLost(g.ch, a, nodeGone(g.in.nodes[a.GetNodeId()])) {
			return
		}
		g.classifyStoppedLost(a)
	case a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE:
		// Finished batch work is done; a service that exits is replaced.
		if g.batch {
			g.done = append(g.done, a)
		}
	case a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST:
		if !g.links.replaced(a) {
			g.classifyLost(a)
		}
	case a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED:
		g.classifyFailed(a)
	default:
		g.classifyLive(a)
	}
}

// classifyLive places an allocation that may still be running.
func (g *groupReconciler) classifyLive(a *droverv1.Allocation) {
	node := g.in.nodes[a.GetNodeId()]
	switch {
	case nodeGone(node):
		g.classifyLost(a)
	case node.GetStatus() == droverv1.NodeStatus_NODE_STATUS_DISCONNECTED:
		g.classifyDisconnected(a)
	case disconnectExpired(a, g.group, g.in.now, g.in.evalID):
		g.lost = append(g.lost, a)
	case a.GetDesiredTransition().GetMigrate():
		// The drainer marks what may leave a draining node now; the rest
		// stays where it is until its turn.
		g.migrate = append(g.migrate, a)
	default:
		g.untainted = append(g.untainted, a)
	}
}

// classifyDisconnected handles an allocation on a disconnected node. It is
// lost unless the group tolerates disconnects and it was running; then it
// becomes unknown until its window ends, and is replaced meanwhile.
func (g *groupReconciler) classifyDisconnected(a *droverv1.Allocation) {
	switch a.GetClientStatus() {
	case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN:
	default:
		g.classifyLost(a)
		return
	}
	if g.group.GetMaxClientDisconnect().AsDuration() <= 0 || disconnectExpired(a, g.group, g.in.now, g.in.evalID) {
		g.classifyLost(a)
		return
	}
	markDisconnected(g.ch, g.later, a, g.group, g.in.now, g.followupPending)
	if !g.links.replaced(a) {
		g.disconnecting = append(g.disconnecting, a)
	}
}

// markDisconnected records that an allocation's node is disconnected and
// schedules the end of its disconnect window, once per disconnect: again
// only if the evaluation scheduled for it is no longer pending (canceled
// by the broker, say) according to pending, which may be nil.
func markDisconnected(ch *groupChanges, later *followups, a *droverv1.Allocation, group *droverv1.TaskGroup, now int64,
	pending func(evalID string) bool) {
	trigger := droverv1.EvalTrigger_EVAL_TRIGGER_MAX_DISCONNECT_TIMEOUT
	window := int64(group.GetMaxClientDisconnect().AsDuration())
	switch f := a.GetFollowupEvalId(); {
	case a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN:
		c := ch.copyOf(a)
		c.MarkUnknown(now)
		later.add(trigger, c.DisconnectDeadline(window, now), c)
	case f == "" || (pending != nil && !pending(f)):
		// Marked unknown by the heartbeat timer, or its follow-up is gone.
		later.add(trigger, a.DisconnectDeadline(window, now), ch.copyOf(a))
	}
}

// classifyFailed handles a failed allocation: ignored once replaced;
// replaced at once when the job changed under it; otherwise its reschedule
// policy decides.
func (g *groupReconciler) classifyFailed(a *droverv1.Allocation) {
	if g.links.replaced(a) {
		return
	}
	if allocUpdate(a, g.job, g.in.jobVersion) == updateDestructive {
		g.untainted = append(g.untainted, a)
		return
	}
	d := decideReschedule(a, g.group.GetReschedulePolicy(), g.in.now, g.in.evalID, g.followupPending)
	g.failed = append(g.failed, failedAlloc{alloc: a, decision: d})
}

// followupPending reports whether an evaluation is still waiting to run.
// Without a way to look evaluations up, it is assumed to be.
func (g *groupReconciler) followupPending(id string) bool {
	if g.in.evalByID == nil || id == g.in.evalID {
		return true
	}
	ev := g.in.evalByID(id)
	return ev != nil && ev.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_PENDING
}

// existing counts the allocations that count toward the group's count.
func (g *groupReconciler) existing() int {
	return len(g.untainted) + len(g.done) + len(g.migrate) + len(g.failed) + len(g.awaitingStop) + len(g.unhealthy)
}

// scaleDown stops allocations beyond the group's count: those awaiting
// their agent's stop first, then failed ones and those a replacement of
// the same name makes redundant, then migrating ones, then those not
// running, older versions before newer, highest name index first.
// Finished batch work is never stopped.
func (g *groupReconciler) scaleDown() {
	excess := g.existing() - int(g.group.GetCount())
	if excess <= 0 {
		return
	}
	excess = g.releaseAwaitingStop(excess)
	if excess == 0 {
		return
	}
	type candidate struct {
		alloc *droverv1.Allocation
		rank  int
	}
	var cands []candidate
	redundant := redundantAllocs(g.untainted, g.job.GetVersion())
	for _, f := range g.failed {
		cands = append(cands, candidate{f.alloc, 0})
	}
	for _, a := range g.migrate {
		cands = append(cands, candidate{a, 1})
	}
	for _, a := range g.untainted {
		rank := 2
		switch {
		case redundant[a.GetId()]:
			rank = 0 // its name's other holder stays
		case g.in.nodes[a.GetNodeId()].GetDrainStrategy() != nil:
			rank = 1 // leaving anyway, in its turn
		case isRunning(a):
			rank = 3
		}
		cands = append(cands, candidate{a, rank})
	}
	slices.SortFunc(cands, func(x, y candidate) int {
		ix, _ := allocNameIndex(x.alloc.GetName())
		iy, _ := allocNameIndex(y.alloc.GetName())
		return cmp.Or(cmp.Compare(x.rank, y.rank),
			cmp.Compare(x.alloc.GetJobVersion(), y.alloc.GetJobVersion()),
			cmp.Compare(iy, ix),
			cmp.Compare(x.alloc.GetId(), y.alloc.GetId()))
	})
	stopped := make(map[string]bool)
	for _, c := range cands[:min(excess, len(cands))] {
		g.ch.stop(c.alloc, allocNotNeeded, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
		stopped[c.alloc.GetId()] = true
	}
	isStopped := func(a *droverv1.Allocation) bool { return stopped[a.GetId()] }
	g.untainted = slices.DeleteFunc(g.untainted, isStopped)
	g.migrate = slices.DeleteFunc(g.migrate, isStopped)
	g.failed = slices.DeleteFunc(g.failed, func(f failedAlloc) bool { return stopped[f.alloc.GetId()] })
}

// releaseAwaitingStop spends up to excess of the group's surplus on
// allocations awaiting their agent's stop, and returns what is left. They
// are stopped already (or in this plan), so they are only no longer
// counted: their follow-up then finds the group at count and places
// nothing. Stopping a running allocation instead would leave the group
// short until then.
func (g *groupReconciler) releaseAwaitingStop(excess int) int {
	n := min(excess, len(g.awaitingStop))
	g.awaitingStop = g.awaitingStop[n:]
	return excess - n
}

// update moves untainted allocations of older job versions to the current
// one: in place where only non-placement fields changed, else by
// replacing them, paced by the deployment: canaries first while it waits
// for promotion, then at most its limit at a time, each replacement
// started beside its allocation with surge. An in-place update waits
// while the node is not ready, since the plan applier takes no updates for
// it.
func (g *groupReconciler) update() {
	limit := g.rolloutLimit()
	canaries := g.canariesWanted()
	inFlight := allocNameSet(g.canaries, g.surging)
	// In name order, so that a rollout goes through the group in order.
	untainted := slices.SortedFunc(slices.Values(g.untainted), byNameIndex)
	for _, a := range untainted {
		switch allocUpdate(a, g.job, g.in.jobVersion) {
		case updateDestructive:
			p := placement{name: a.GetName(), group: g.group, previous: a}
			switch {
			case g.awaitingPromotion():
				if canaries > 0 && !inFlight[a.GetName()] {
					canaries--
					g.ch.placeCanary(placement{name: a.GetName(), group: g.group, canary: true})
				}
				g.outdated++
			case inFlight[a.GetName()] || limit == 0:
				g.outdated++
			case g.group.GetUpdate().GetSurge() && g.rolledOut():
				limit--
				g.ch.surge(a, p)
			default:
				limit--
				g.ch.destructive(a, p)
			}
		case updateInPlace:
			if !a.ClientTerminal() && nodeReady(g.in.nodes[a.GetNodeId()]) {
				g.ch.inPlace(a, g.job, g.in.evalID)
			}
		}
	}
}

// migrateAll stops allocations leaving their node and replaces each.
func (g *groupReconciler) migrateAll() {
	for _, a := range g.migrate {
		g.ch.migrate(a, placement{name: a.GetName(), group: g.group, previous: a})
	}
}

// replace replaces the deployment's unhealthy allocations and places the
// replacements of failed allocations due now, stops
// lost allocations, replaces lost and disconnecting ones while the group
// is under count, and fills what remains with new allocations on the
// lowest free names, once the deployment's canaries are promoted.
func (g *groupReconciler) replace() {
	count := int(g.group.GetCount())
	existing := g.existing()
	names := newAllocNames(g.job.GetId(), g.group.GetName())
	for _, set := range [][]*droverv1.Allocation{g.untainted, g.done, g.migrate, g.awaitingStop} {
		for _, a := range set {
			names.take(a.GetName())
		}
	}
	for _, a := range g.unhealthy {
		names.take(a.GetName())
		g.ch.stop(a, allocUnhealthy, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED)
		g.ch.place(placement{name: a.GetName(), group: g.group, previous: a, reschedule: true})
	}
	for _, f := range g.failed {
		names.take(f.alloc.GetName())
		if f.decision.timing == rescheduleNow {
			g.ch.place(placement{name: f.alloc.GetName(), group: g.group, previous: f.alloc, reschedule: true, delay: f.decision.delay})
		}
	}
	for _, a := range g.lost {
		cs := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
		if a.GetClientStatus() == cs {
			cs = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED
		}
		g.ch.stop(a, allocLost, cs)
		if existing < count && !g.links.replaced(a) {
			existing++
			names.take(a.GetName())
			g.ch.place(placement{name: a.GetName(), group: g.group, previous: a, lost: true})
		}
	}
	for _, a := range g.stoppedLost {
		if existing < count {
			existing++
			names.take(a.GetName())
			g.ch.place(placement{name: a.GetName(), group: g.group, previous: a, lost: true})
		}
	}
	for _, a := range g.disconnecting {
		if existing < count {
			existing++
			names.take(a.GetName())
			g.ch.place(placement{name: a.GetName(), group: g.group, previous: a})
		}
	}
	if existing < count && !g.awaitingPromotion() {
		for _, name := range names.next(count - existing) {
			g.ch.place(placement{name: name, group: g.group})
		}
	}
}

// delayFailed schedules a follow-up evaluation for each failed allocation
// due later that has none pending, and stamps it on the allocation where
// its node takes updates. Unstamped, the allocation's failure time stays
// put and the next evaluation computes the same due time.
func (g *groupReconciler) delayFailed() {
	for _, f := range g.failed {
		a := f.alloc
		if f.decision.timing != rescheduleLater || a.GetFollowupEvalId() != "" {
			continue
		}
		var stamp *droverv1.Allocation
		if nodeReady(g.in.nodes[a.GetNodeId()]) {
			stamp = g.ch.copyOf(a)
		}
		g.later.add(droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_RESCHEDULE, f.decision.at, stamp)
	}
}
