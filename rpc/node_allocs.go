package rpc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// UpdateAlloc records the client status of the node's allocations. Reports
// are refused while the node is down or disconnected: the agent must
// heartbeat first, so that a report always follows the node's return.
// Accepted reports join the current window's raft entry and are
// acknowledged once it is applied.
func (s *nodeService) UpdateAlloc(ctx context.Context, req *droverv1.UpdateAllocRequest) (*droverv1.UpdateAllocResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	snap := s.backend.State().Snapshot()
	node, err := authenticate(snap, req.GetNodeId(), req.GetSecretId())
	if err != nil {
		return nil, err
	}
	if node.GetStatus().IsUnresponsive() {
		return nil, refusedReport(node.GetId(), node.GetStatus())
	}
	group, err := allocUpdates(snap, node, req.GetAllocs())
	if err != nil {
		return nil, err
	}
	g, _, err := s.reports.Submit(ctx, group, len(group.GetAllocs()))
	if err != nil {
		return nil, err
	}
	res, ok := g.Response.(*state.ClientUpdateResult)
	if !ok {
		return nil, fmt.Errorf("allocation reports at index %d: unexpected apply response %T", g.Index, g.Response)
	}
	if status, refused := res.RefusedNodes[node.GetId()]; refused {
		return nil, refusedReport(node.GetId(), status)
	}
	resp := &droverv1.UpdateAllocResponse{Index: g.Index}
	if len(res.UnknownAllocs) > 0 {
		mine := make(map[string]bool, len(group.GetAllocs()))
		for _, u := range group.GetAllocs() {
			mine[u.GetAllocId()] = true
		}
		for _, id := range res.UnknownAllocs {
			if mine[id] {
				resp.UnknownAllocIds = append(resp.UnknownAllocIds, id)
			}
		}
	}
	return resp, nil
}

func refusedReport(nodeID string, status droverv1.NodeStatus) error {
	return fmt.Errorf("node %s may not report allocations while %s; heartbeat (UpdateStatus) first: %w",
		nodeID, status, ErrFailedPrecondition)
}

// allocUpdates checks that every reported allocation belongs to the node
// and builds the node's share of the batch, with the evaluations the
// reports call for: at most one per job. Reports that change nothing
// stored are left out (the node's report is still recorded): agents
// report each allocation pending as they receive it, and the servers
// placed it pending.
func allocUpdates(snap *state.Snapshot, node *droverv1.Node, updates []*droverv1.AllocClientUpdate) (*droverv1.NodeAllocUpdates, error) {
	group := &droverv1.NodeAllocUpdates{NodeId: node.GetId(), Allocs: make([]*droverv1.AllocClientUpdate, 0, len(updates))}
	evalJobs := make(map[string]struct{})
	for _, u := range updates {
		alloc := snap.AllocByID(u.GetAllocId())
		if alloc == nil {
			// Garbage collected, or placed by an entry this server has not
			// applied yet: the entry's apply decides, and the response
			// tells the agent if it is unknown.
			group.Allocs = append(group.Allocs, u)
			continue
		}
		if alloc.GetNodeId() != node.GetId() {
			return nil, fmt.Errorf("allocation %s belongs to node %s, not %s: %w",
				u.GetAllocId(), alloc.GetNodeId(), node.GetId(), errPermissionDenied)
		}
		if !state.ReportChanges(alloc, u) {
			continue
		}
		group.Allocs = append(group.Allocs, u)
		var job *droverv1.Job
		trigger, ok := reportTrigger(alloc, u.GetClientStatus(), func() *droverv1.Job {
			job = snap.JobByID(alloc.GetJobId())
			return job
		})
		if !ok {
			continue
		}
		if _, dup := evalJobs[job.GetId()]; dup {
			continue
		}
		evalJobs[job.GetId()] = struct{}{}
		group.Evals = append(group.Evals, NewEval(job, trigger, node.GetId(), 0))
	}
	return group, nil
}

// reportTrigger says whether an agent's report calls for scheduling, and
// why: an allocation that was unknown (its node disconnected) is back; a
// failed allocation may be rescheduled; a service or system allocation that
// stopped while the servers still want it running must be replaced. jobOf
// returns the allocation's job; it is called only for a report that may
// trigger, since nearly every report (pending, running) cannot and agents
// send hundreds of thousands of them.
func reportTrigger(alloc *droverv1.Allocation, reported droverv1.AllocClientStatus, jobOf func() *droverv1.Job) (droverv1.EvalTrigger, bool) {
	var trigger droverv1.EvalTrigger
	switch {
	case alloc.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN:
		trigger = droverv1.EvalTrigger_EVAL_TRIGGER_RECONNECT
	case alloc.ServerTerminal() || alloc.ClientTerminal():
		return 0, false
	case reported == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED:
		trigger = droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE
	case reported == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE:
		trigger = droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP
	default:
		return 0, false
	}
	job := jobOf()
	if job == nil || job.GetStop() {
		return 0, false
	}
	if trigger == droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP && job.GetType() == droverv1.JobType_JOB_TYPE_BATCH {
		return 0, false // a batch allocation that completed is done
	}
	return trigger, true
}

// GetAllocs returns the node's allocations and the job versions they run.
// With a min_index it blocks until the servers change one of the node's
// allocations past it (agents' own reports do not count), max_wait passes,
// or the server shuts down.
func (s *nodeService) GetAllocs(ctx context.Context, req *droverv1.GetAllocsRequest) (*droverv1.GetAllocsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if _, err := authenticate(s.backend.State().Snapshot(), req.GetNodeId(), req.GetSecretId()); err != nil {
		return nil, err
	}
	if req.GetMinIndex() > 0 {
		s.allocWatchers.Add(1)
		defer s.allocWatchers.Add(-1)
	}
	resp := &droverv1.GetAllocsResponse{}
	// An agent's own report rewrites its node's row too, which wakes the
	// query only to find the same index: the job versions are looked up
	// once, for the answer actually sent. The snapshot is not kept while
	// the query waits: thousands of agents wait at once, and each held
	// snapshot would keep alive every version of the state written since
	// it was taken.
	var answered *state.Snapshot
	var rebuiltAt uint64
	_, err := s.query(ctx, &droverv1.QueryOptions{MinIndex: req.GetMinIndex(), MaxWait: durationpb.New(req.EffectiveMaxWait())},
		func(snap *state.Snapshot) (uint64, error) {
			allocs, index := snap.AllocsByNode(req.GetNodeId())
			resp.Allocs, resp.Index, answered = allocs, atLeastOne(index), nil
			resp.StateIndex, rebuiltAt = snap.Index(), snap.RebuiltAt()
			if index > req.GetMinIndex() {
				answered = snap // answered now: the query returns without waiting
			}
			return resp.Index, nil
		})
	if err != nil {
		return nil, err
	}
	if answered == nil {
		// The wait ended without a change to the node's allocations; a
		// job version never changes once written, so a newer snapshot
		// holds the ones these allocations run.
		answered = s.backend.State().Snapshot()
	}
	all := resp.Allocs
	if known := req.GetKnownIndex(); known > 0 && known <= resp.StateIndex && known >= rebuiltAt {
		resp.Allocs, resp.UnchangedAllocIds, resp.SinceKnownIndex = changedSince(all, known, req.GetKnownCount())
		resp.Jobs = jobVersionsOf(answered, resp.Allocs, func(j *droverv1.Job) bool {
			return j.GetJobModifyIndex() <= known && heldAt(all, j, known)
		})
		return resp, nil
	}
	resp.Allocs, resp.UnchangedAllocIds = leaveOutKnown(all, req.GetKnownAllocs())
	resp.Jobs = jobVersionsOf(answered, resp.Allocs, knownJobs(req.GetKnownJobs()))
	return resp, nil
}

// changedSince splits a node's allocations against the state_index of the
// answer the agent holds (known): those written after it are sent, the
// rest the agent holds as they are. Every write of an allocation moves its
// modify_index, so one at or below known is the one the agent holds. The
// answer is relative to known (the agent keeps what is not sent) unless
// some of the knownCount allocations the agent held were collected since:
// then fewer of those are left than it held, and the answer is whole,
// naming the unchanged ones, so the agent drops the rest. An allocation
// created at or before known was in the agent's answer, so counting those
// still here needs no list from the agent.
func changedSince(allocs []*droverv1.Allocation, known uint64, knownCount uint32) (send []*droverv1.Allocation, unchanged []string, relative bool) {
	stillHeld := 0
	for _, a := range allocs {
		if a.GetModifyIndex() <= known {
			stillHeld++
			continue
		}
		if a.GetCreateIndex() <= known {
			stillHeld++
		}
		send = append(send, a)
	}
	if stillHeld == int(knownCount) {
		return send, nil, true
	}
	for _, a := range allocs {
		if a.GetModifyIndex() <= known {
			unchanged = append(unchanged, a.GetId())
		}
	}
	return send, unchanged, false
}

// heldAt reports whether one of the node's allocations ran job version j
// at known: the agent then holds that version, as it keeps every version
// an allocation it holds runs. An allocation changes its job version only
// through the schedulers, whose writes move alloc_modify_index, so one
// whose alloc_modify_index is at or below known ran its version then, even
// if its agent reported on it since (which moves modify_index only). Most
// allocations an answer sends are such: reported since the last answer.
func heldAt(allocs []*droverv1.Allocation, j *droverv1.Job, known uint64) bool {
	for _, a := range allocs {
		if a.GetAllocModifyIndex() <= known && a.GetJobVersion() == j.GetVersion() && a.GetJobId() == j.GetId() {
			return true
		}
	}
	return false
}

// leaveOutKnown splits a node's allocations into those to send and the
// ids of those the agent holds at the version it named (known): an
// allocation is unchanged when its modify_index is the one named, since
// every change to an allocation moves it. A node's answer otherwise
// carries all its allocations each time one of them is placed or
// stopped, which was most of what the servers encoded for agents and
// most of what agents decoded. Both lists are walked in id order, which
// costs no map per poll: a node's allocations come in it from its row,
// and agents send known in it (sorted here if not). The walk only ever
// misses a match, never makes one, so an order broken anyway would cost
// sends, not correctness.
func leaveOutKnown(allocs []*droverv1.Allocation, known []*droverv1.KnownAlloc) (send []*droverv1.Allocation, unchanged []string) {
	if len(known) == 0 {
		return allocs, nil
	}
	knownByID := func(a, b *droverv1.KnownAlloc) int { return strings.Compare(a.GetAllocId(), b.GetAllocId()) }
	if !slices.IsSortedFunc(known, knownByID) {
		known = slices.SortedFunc(slices.Values(known), knownByID)
	}
	send = make([]*droverv1.Allocation, 0, len(allocs))
	i := 0
	for _, a := range allocs {
		for i < len(known) && known[i].GetAllocId() < a.GetId() {
			i++
		}
		if i < len(known) && known[i].GetAllocId() == a.GetId() && known[i].GetModifyIndex() == a.GetModifyIndex() {
			unchanged = append(unchanged, a.GetId())
			continue
		}
		send = append(send, a)
	}
	return send, unchanged
}

// knownJobs returns whether the agent holds a job version, by the list it
// named (known_jobs).
func knownJobs(known []*droverv1.KnownJobVersion) func(*droverv1.Job) bool {
	if len(known) == 0 {
		return func(*droverv1.Job) bool { return false }
	}
	held := make(map[jobVersionKey]uint64, len(known))
	for _, k := range known {
		held[jobVersionKey{k.GetJobId(), k.GetVersion()}] = k.GetJobModifyIndex()
	}
	return func(j *droverv1.Job) bool {
		at, ok := held[jobVersionKey{j.GetId(), j.GetVersion()}]
		return ok && at == j.GetJobModifyIndex()
	}
}

// jobVersionKey names one version of a job.
type jobVersionKey struct {
	id string
	v  uint64
}

// jobVersionsOf returns the job versions the allocations run, each once,
// less those the agent holds already (held). An agent wakes once per
// placement on its node; without held, every answer carried every job
// version again, most of the encoding of a busy server's answers. The
// allocations are those the answer sends: the agent holds the job
// versions of those it holds unchanged.
func jobVersionsOf(snap *state.Snapshot, allocs []*droverv1.Allocation, held func(*droverv1.Job) bool) []*droverv1.Job {
	var seen map[jobVersionKey]struct{}
	var jobs []*droverv1.Job
	for _, a := range allocs {
		k := jobVersionKey{a.GetJobId(), a.GetJobVersion()}
		if _, dup := seen[k]; dup {
			continue
		}
		if seen == nil {
			seen = make(map[jobVersionKey]struct{})
		}
		seen[k] = struct{}{}
		j := snap.JobVersion(k.id, k.v)
		if j == nil || held(j) {
			continue
		}
		jobs = append(jobs, j)
	}
	return jobs
}
