package blocked

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Block tracks an evaluation written through raft with status BLOCKED.
func (t *Tracker) Block(ev *droverv1.Evaluation) {
	t.block(ev, "")
}

// Reblock tracks a blocked evaluation that a worker, holding it under
// token, processed again and still could not place. When it is released,
// the token lets the broker hold it back until that worker acks.
func (t *Tracker) Reblock(ev *droverv1.Evaluation, token string) {
	t.block(ev, token)
}

func (t *Tracker) block(ev *droverv1.Evaluation, token string) {
	if ev == nil {
		return
	}
	t.mu.Lock()
	if !t.enabled {
		t.mu.Unlock()
		return
	}
	released := t.blockLocked(ev, token)
	t.mu.Unlock()
	t.release(released)
}

// blockLocked tracks ev unless a newer blocked evaluation of its job is
// tracked already, or an unblock it would have been released by happened
// after its snapshot; in that case it returns ev for release.
func (t *Tracker) blockLocked(ev *droverv1.Evaluation, token string) map[*droverv1.Evaluation]string {
	if !t.supersedeLocked(ev, &token) {
		return nil
	}
	if t.missedUnblockLocked(ev) {
		t.logger.Debug("blocked eval missed an unblock; releasing it", "eval_id", ev.GetId(), "job_id", ev.GetJobId())
		return map[*droverv1.Evaluation]string{ev: token}
	}
	t.trackLocked(tracked{ev: ev, token: token})
	return nil
}

// supersedeLocked keeps one blocked evaluation per job: of ev and the one
// tracked for its job, the one with the larger max(create, snapshot)
// index stays (ev on a tie) and the other becomes a duplicate. It reports
// whether ev stays. The same evaluation blocked again (written through
// raft, then reblocked by its worker) replaces itself, keeping a token
// when the newer call has none.
func (t *Tracker) supersedeLocked(ev *droverv1.Evaluation, token *string) bool {
	existingID, ok := t.jobs[ev.GetJobId()]
	if !ok {
		return true
	}
	existing := t.untrackLocked(ev.GetJobId())
	if existingID == ev.GetId() {
		if *token == "" {
			*token = existing.token
		}
		return true
	}
	if latestIndex(existing.ev) > latestIndex(ev) {
		t.trackLocked(existing)
		t.duplicates = append(t.duplicates, ev)
		return false
	}
	t.duplicates = append(t.duplicates, existing.ev)
	return true
}

// latestIndex is how new a blocked evaluation's view of the cluster is.
func latestIndex(ev *droverv1.Evaluation) uint64 {
	return max(ev.GetCreateIndex(), ev.GetSnapshotIndex())
}

// missedUnblockLocked reports whether an unblock recorded after ev's
// snapshot would have released it: the scheduler worked on an older
// state and may have missed the capacity that unblock announced.
func (t *Tracker) missedUnblockLocked(ev *droverv1.Evaluation) bool {
	snapshot := ev.GetSnapshotIndex()
	var newest uint64
	for class, m := range t.unblocks {
		newest = max(newest, m.index)
		if eligible, seen := ev.GetClassEligibility()[class]; seen && !eligible {
			continue
		}
		if snapshot < m.index {
			return true
		}
	}
	return ev.GetEscapedComputedClass() && snapshot < newest
}

// trackLocked makes w its job's tracked evaluation.
func (t *Tracker) trackLocked(w tracked) {
	t.jobs[w.ev.GetJobId()] = w.ev.GetId()
	if w.ev.GetEscapedComputedClass() {
		t.escaped[w.ev.GetId()] = w
	} else {
		t.captured[w.ev.GetId()] = w
	}
}

// untrackLocked forgets the job's tracked evaluation and returns it.
func (t *Tracker) untrackLocked(jobID string) tracked {
	id, ok := t.jobs[jobID]
	if !ok {
		return tracked{}
	}
	delete(t.jobs, jobID)
	if w, ok := t.captured[id]; ok {
		delete(t.captured, id)
		return w
	}
	w := t.escaped[id]
	delete(t.escaped, id)
	return w
}

// Untrack forgets the job's blocked evaluation: the job's newest
// evaluation placed everything, so it is no longer needed.
func (t *Tracker) Untrack(jobID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.enabled {
		t.untrackLocked(jobID)
	}
}
