package state

import (
	"fmt"
	"slices"
	"strings"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// ClientUpdateResult says which parts of an AllocClientUpdateEntry were
// not applied.
type ClientUpdateResult struct {
	// RefusedNodes maps the id of each node whose updates were refused to its
	// status at the time: a node that is down or disconnected (or gone) must
	// heartbeat before its reports count.
	RefusedNodes map[string]droverv1.NodeStatus
	// UnknownAllocs lists reported allocations the state does not hold on
	// that node (garbage collected, or never there).
	UnknownAllocs []string
}

// ReportAllocsPerEntry bounds the allocation reports one
// AllocClientUpdateEntry should carry. go-immutable-radix remembers at most
// 8,192 changed tree nodes per transaction to wake watchers with; a commit
// that changes more walks the whole allocation tree instead. With a million
// allocations an entry of 5,000 reports then costs 0.75 s, 150 µs a
// report against 16 µs under the bound (BenchmarkClientUpdatesAtScale). A
// report changes about three tree nodes of its own, and the upper levels
// of the tree add at most 4,369, so 512 reports stay under the limit up to
// several million allocations.
const ReportAllocsPerEntry = 512

// ReportChanges reports whether an agent's report u would change the
// allocation a as stored: its client status, its description, or its
// health in a deployment. An agent may report an allocation pending as it
// receives it, which the servers already know; the leader leaves such
// reports out of the raft entry, so that no server applies them.
func ReportChanges(a *droverv1.Allocation, u *droverv1.AllocClientUpdate) bool {
	if a.GetClientStatus() != u.GetClientStatus() || a.GetClientDescription() != u.GetClientDescription() {
		return true
	}
	if u.Healthy == nil || a.GetDeploymentId() == "" {
		return false // reportHealth ignores it
	}
	st := a.GetDeploymentStatus()
	return st == nil || st.Healthy == nil || *st.Healthy != u.GetHealthy()
}

// UpdateAllocsFromClient applies an AllocClientUpdateEntry: agents' reports
// of their allocations' client status. A node's reports are refused as a
// whole if the node is down or disconnected when the entry is applied, even
// though it was responsive when the report arrived: otherwise a report made
// before a missed heartbeat would count as made after it, and the node could
// become ready without having reported its allocations since.
//
// Accepted reports change only client-owned fields and leave each
// allocation's alloc_modify_index alone; the node's last_alloc_update_index
// becomes the entry's index. The evaluations of accepted nodes are written,
// at most one per job.
func (s *StateStore) UpdateAllocsFromClient(index uint64, e *droverv1.AllocClientUpdateEntry) (*ClientUpdateResult, []Change, error) {
	return s.updateAllocsFromClient(index, e, everyReport)
}

// UpdateAllocsFromClientFirstReports applies an AllocClientReport entry:
// as UpdateAllocsFromClient, except that a node's last_alloc_update_index
// becomes the entry's index only if the node has not reported since it
// last missed a heartbeat. That comparison is all the field is read for
// (an initializing node becomes ready once it holds), so later reports
// leave the node's row alone: in c1m, where most reports carry one
// allocation, rewriting the row was a quarter of applying them.
func (s *StateStore) UpdateAllocsFromClientFirstReports(index uint64, e *droverv1.AllocClientUpdateEntry) (*ClientUpdateResult, []Change, error) {
	return s.updateAllocsFromClient(index, e, firstReport)
}

// reportRecording says which of a node's reports rewrite its row.
type reportRecording bool

const (
	everyReport reportRecording = false
	firstReport reportRecording = true
)

func (s *StateStore) updateAllocsFromClient(index uint64, e *droverv1.AllocClientUpdateEntry, recording reportRecording) (*ClientUpdateResult, []Change, error) {
	res := &ClientUpdateResult{}
	changes, err := s.write(index, func(tx *txn) error {
		evalJobs := make(map[string]struct{})
		counts := make(deploymentCounts)
		for _, group := range e.GetNodes() {
			accepted, err := tx.applyNodeAllocUpdates(group, e.GetUpdatedAt(), res, counts, recording)
			if err != nil {
				return err
			}
			if !accepted {
				continue
			}
			for _, ev := range group.GetEvals() {
				if _, dup := evalJobs[ev.GetJobId()]; dup {
					continue
				}
				evalJobs[ev.GetJobId()] = struct{}{}
				if err := tx.upsertEval(ev); err != nil {
					return err
				}
			}
		}
		return counts.write(tx, e.GetUpdatedAt())
	})
	if err != nil {
		return nil, nil, err
	}
	return res, changes, nil
}

// applyNodeAllocUpdates applies one node's reports; it returns false if the
// node's reports were refused.
func (tx *txn) applyNodeAllocUpdates(group *droverv1.NodeAllocUpdates, now int64, res *ClientUpdateResult, counts deploymentCounts, recording reportRecording) (bool, error) {
	nodeID := group.GetNodeId()
	node := tx.node(nodeID)
	if node == nil || node.GetStatus().IsUnresponsive() {
		if res.RefusedNodes == nil {
			res.RefusedNodes = make(map[string]droverv1.NodeStatus)
		}
		res.RefusedNodes[nodeID] = node.GetStatus()
		return false, nil
	}
	for _, u := range group.GetAllocs() {
		if !u.GetClientStatus().IsAgentReportable() {
			return false, invalidEntry("allocation %s: agents may not report client status %s", u.GetAllocId(), u.GetClientStatus())
		}
		old := tx.alloc(u.GetAllocId())
		if old == nil || old.GetNodeId() != nodeID {
			res.UnknownAllocs = append(res.UnknownAllocs, u.GetAllocId())
			continue
		}
		// A report changes scalars only (reportHealth replaces the
		// deployment status it changes), so the new version shares the
		// rest. Sharing the resources object also tells the schedulers'
		// usage caches that the allocation holds what it held.
		a := old.ShallowCopy()
		a.ClientStatus = u.GetClientStatus()
		a.ClientDescription = u.GetClientDescription()
		a.ModifyIndex = tx.index
		a.ModifyTime = now
		tx.reportHealth(a, u, counts)
		if err := tx.putAlloc(old, a, false); err != nil {
			return false, err
		}
	}
	// Record the report even if every allocation was unknown: the agent has
	// told the servers what it holds since it last missed a heartbeat.
	if recording == firstReport && node.GetLastAllocUpdateIndex() > node.GetLastMissedHeartbeatIndex() {
		return true, nil
	}
	n := nodeRevision(node)
	n.LastAllocUpdateIndex = tx.index
	return true, tx.insert(TableNodes, n)
}

// UpsertPlanResults applies a PlanResultEntry: it places new allocations,
// writes the scheduler's updates of existing ones and stops allocations,
// then sets the plan's evaluation's modify index to this entry's index and
// writes the evaluations that came with the plan.
//
// A placement must refer to an existing node and job version; an entry that
// does not fails as a whole, and the plan applier's worker retries on fresh
// state.
func (s *StateStore) UpsertPlanResults(index uint64, e *droverv1.PlanResultEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error { return tx.applyPlanResult(e) })
}

func (tx *txn) applyPlanResult(e *droverv1.PlanResultEntry) error {
	now := e.GetAppliedAt()
	// The deployment first, so that the allocations placed into it count.
	if d := e.GetDeployment(); d != nil {
		if err := tx.upsertPlannedDeployment(d, now); err != nil {
			return err
		}
	}
	if err := tx.updateDeploymentStatuses(e.GetDeploymentUpdates(), now); err != nil {
		return err
	}
	// In id order, consecutive inserts share most of their radix-tree path.
	allocs := slices.SortedFunc(slices.Values(e.GetAllocations()), func(a, b *droverv1.Allocation) int {
		return strings.Compare(a.GetId(), b.GetId())
	})
	refs := newRefCache(tx)
	counts := make(deploymentCounts)
	for _, a := range allocs {
		if err := tx.upsertPlannedAlloc(a, now, refs, counts); err != nil {
			return err
		}
	}
	if err := counts.write(tx, now); err != nil {
		return err
	}
	for _, stop := range e.GetStops() {
		if err := tx.stopAlloc(stop, now); err != nil {
			return err
		}
	}
	if ev := tx.eval(e.GetEvalId()); ev != nil {
		c := ev.CloneVT()
		c.ModifyIndex = tx.index
		if err := tx.insert(TableEvals, c); err != nil {
			return err
		}
	}
	return tx.upsertEvals(e.GetEvals())
}

// upsertPlannedAlloc writes an allocation the scheduler created or changed.
func (tx *txn) upsertPlannedAlloc(a *droverv1.Allocation, now int64, refs *refCache, counts deploymentCounts) error {
	if a == nil {
		return invalidEntry("plan result with an empty allocation")
	}
	if err := refs.intern(a); err != nil {
		return err
	}
	a.ModifyIndex = tx.index
	a.AllocModifyIndex = tx.index
	a.ModifyTime = now
	old := tx.alloc(a.GetId())
	if a.GetDeploymentId() != "" && a.GetDeploymentId() != old.GetDeploymentId() {
		// Placed into a deployment, or moved into one in place.
		tx.countPlacement(a, now, counts)
	}
	if old == nil {
		return tx.placeAlloc(a, now)
	}
	if old.GetNodeId() != a.GetNodeId() || old.GetJobId() != a.GetJobId() {
		return invalidEntry("allocation %s cannot move from node %s job %q to node %s job %q",
			a.GetId(), old.GetNodeId(), old.GetJobId(), a.GetNodeId(), a.GetJobId())
	}
	a.CreateIndex = old.GetCreateIndex()
	a.CreateTime = old.GetCreateTime()
	if a.NextAllocation == "" {
		a.NextAllocation = old.GetNextAllocation()
	}
	if a.GetDeploymentId() == old.GetDeploymentId() {
		// Health is the agent's, and promotion ends a canary while the
		// scheduler may have planned from before it.
		a.DeploymentStatus = old.GetDeploymentStatus()
	}
	// The client owns its status; the servers override it only to record
	// that a node was lost or disconnected.
	switch a.GetClientStatus() {
	case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN:
	default:
		a.ClientStatus = old.GetClientStatus()
		a.ClientDescription = old.GetClientDescription()
	}
	return tx.putAlloc(old, a, true)
}

// placeAlloc writes a new allocation and links it from the one it replaces.
func (tx *txn) placeAlloc(a *droverv1.Allocation, now int64) error {
	a.CreateIndex = tx.index
	a.CreateTime = now
	if a.DesiredStatus == droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_UNSPECIFIED {
		a.DesiredStatus = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
	}
	if a.ClientStatus == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED {
		a.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	}
	if err := tx.putAlloc(nil, a, true); err != nil {
		return err
	}
	if a.GetPreviousAllocation() == "" {
		return nil
	}
	prev := tx.alloc(a.GetPreviousAllocation())
	if prev == nil || prev.GetNextAllocation() == a.GetId() {
		return nil
	}
	// The link is bookkeeping for the scheduler; the previous allocation's
	// agent has nothing to do about it, so its node set is not bumped.
	p := prev.CloneVT()
	p.NextAllocation = a.GetId()
	p.ModifyIndex = tx.index
	return tx.putAlloc(prev, p, false)
}

// refCache remembers, within one transaction, the nodes, job versions and
// evaluations that allocations refer to: the allocations of one plan share
// one job and one evaluation and few nodes.
type refCache struct {
	tx    *txn
	nodes map[string]*droverv1.Node
	jobs  map[string]*droverv1.Job // by job id and version, see versionKey
	evals map[string]*droverv1.Evaluation
}

func newRefCache(tx *txn) *refCache {
	return &refCache{
		tx:    tx,
		nodes: make(map[string]*droverv1.Node),
		jobs:  make(map[string]*droverv1.Job),
		evals: make(map[string]*droverv1.Evaluation),
	}
}

// intern checks that the allocation's node, job version and task group
// exist, and makes its id fields share memory with the objects they name:
// decoded from a raft entry or a snapshot, each would otherwise be its own
// copy, and allocations are the most numerous objects in the state.
func (c *refCache) intern(a *droverv1.Allocation) error {
	_, node, job, ev := c.resolve(a)
	if node == nil {
		return fmt.Errorf("allocation %s: node %s: %w", a.GetId(), a.GetNodeId(), ErrNotFound)
	}
	if job == nil {
		return fmt.Errorf("allocation %s: job %q version %d: %w", a.GetId(), a.GetJobId(), a.GetJobVersion(), ErrNotFound)
	}
	if job.LookupTaskGroup(a.GetTaskGroup()) == nil {
		return fmt.Errorf("allocation %s: task group %q of job %q: %w", a.GetId(), a.GetTaskGroup(), a.GetJobId(), ErrNotFound)
	}
	share(a, node, job, ev)
	return nil
}

// internKnown shares the id fields with whichever referenced objects exist.
// Restore uses it: a snapshot may hold terminal allocations whose node has
// already been garbage collected.
func (c *refCache) internKnown(a *droverv1.Allocation) {
	share(c.resolve(a))
}

func (c *refCache) resolve(a *droverv1.Allocation) (*droverv1.Allocation, *droverv1.Node, *droverv1.Job, *droverv1.Evaluation) {
	node, ok := c.nodes[a.GetNodeId()]
	if !ok {
		node = c.tx.node(a.GetNodeId())
		c.nodes[a.GetNodeId()] = node
	}
	key := string(versionKey(a.GetJobId(), a.GetJobVersion()))
	job, ok := c.jobs[key]
	if !ok {
		job = c.tx.jobVersion(a.GetJobId(), a.GetJobVersion())
		c.jobs[key] = job
	}
	ev, ok := c.evals[a.GetEvalId()]
	if !ok {
		ev = c.tx.eval(a.GetEvalId())
		c.evals[a.GetEvalId()] = ev
	}
	return a, node, job, ev
}

func share(a *droverv1.Allocation, node *droverv1.Node, job *droverv1.Job, ev *droverv1.Evaluation) {
	if node != nil {
		a.NodeId = node.GetId()
	}
	if job != nil {
		a.JobId = job.GetId()
		if tg := job.LookupTaskGroup(a.GetTaskGroup()); tg != nil {
			a.TaskGroup = tg.GetName()
		}
	}
	if ev != nil {
		a.EvalId = ev.GetId()
	}
}

// stopAlloc applies one AllocStop. Stopping an allocation that is gone
// (garbage collected after it ended) is not an error.
func (tx *txn) stopAlloc(stop *droverv1.AllocStop, now int64) error {
	switch stop.GetDesiredStatus() {
	case droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_EVICT:
	default:
		return invalidEntry("allocation %s: stop with desired status %s", stop.GetAllocId(), stop.GetDesiredStatus())
	}
	old := tx.alloc(stop.GetAllocId())
	if old == nil {
		return nil
	}
	a := old.CloneVT()
	a.DesiredStatus = stop.GetDesiredStatus()
	a.DesiredDescription = stop.GetDesiredDescription()
	if cs := stop.GetClientStatus(); cs != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED {
		if cs != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST {
			return invalidEntry("allocation %s: a stop may only set client status lost, not %s", stop.GetAllocId(), cs)
		}
		a.ClientStatus = cs
		a.AllocStates = append(a.AllocStates, &droverv1.AllocState{
			Field: droverv1.AllocStateField_ALLOC_STATE_FIELD_CLIENT_STATUS, ClientStatus: cs, Time: now,
		})
	}
	if stop.GetFollowupEvalId() != "" {
		a.FollowupEvalId = stop.GetFollowupEvalId()
	}
	a.ModifyIndex = tx.index
	a.AllocModifyIndex = tx.index
	a.ModifyTime = now
	return tx.putAlloc(old, a, true)
}
