package loadgen

import droverv1 "github.com/droverhq/drover/proto/drover/v1"

// jobProgress is how far one job's allocations are from a step's goal.
type jobProgress struct {
	// Wanted is how many allocations should reach the goal status.
	Wanted int
	// Reached counts allocations the servers want run that are in the
	// goal status: running, or complete for a batch job.
	Reached int
	// Lingering counts allocations the servers want stopped that the
	// agent has not yet reported finished.
	Lingering int
	// Batch says the goal is complete rather than running.
	Batch bool
	// SettledAt is the latest modify time (unix ns) of an allocation
	// changed at or after the step began.
	SettledAt int64
}

// done reports whether the job reached the goal: exactly the allocations
// wanted in their goal status, none to stop still running. A batch job may
// have more: an allocation given up as lost may still complete when its
// node returns, beside its replacement.
func (p jobProgress) done() bool {
	if p.Batch {
		return p.Reached >= p.Wanted && p.Lingering == 0
	}
	return p.Reached == p.Wanted && p.Lingering == 0
}

// progressOf measures a job's allocations against its goal. stopped says
// the step deregistered the job, so it wants none; since is the step's
// start (unix ns).
func progressOf(job *droverv1.Job, stopped bool, allocs []*droverv1.Allocation, since int64) jobProgress {
	goal := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	if job.GetType() == droverv1.JobType_JOB_TYPE_BATCH {
		goal = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	}
	p := jobProgress{Batch: goal == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE}
	system := job.GetType() == droverv1.JobType_JOB_TYPE_SYSTEM
	if !stopped && !system {
		for _, tg := range job.GetTaskGroups() {
			p.Wanted += int(tg.GetCount())
		}
	}
	for _, a := range allocs {
		if a.GetModifyTime() >= since {
			p.SettledAt = max(p.SettledAt, a.GetModifyTime())
		}
		wantRun := a.GetDesiredStatus() == droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
		switch {
		case wantRun && !stopped && a.GetClientStatus() == goal:
			p.Reached++
		case (!wantRun || stopped) && !a.ClientTerminal():
			p.Lingering++
		}
		if system && wantRun && !stopped {
			// A system job wants one allocation on every node it was
			// placed on.
			p.Wanted++
		}
	}
	return p
}

// evalsDone counts the evaluations created in the raft index range
// (after, upTo] that completed, and reports whether any of them is still
// pending.
func evalsDone(evals []*droverv1.Evaluation, after, upTo uint64) (complete int, pending bool) {
	for _, e := range evals {
		if ci := e.GetCreateIndex(); ci <= after || ci > upTo {
			continue
		}
		switch e.GetStatus() {
		case droverv1.EvalStatus_EVAL_STATUS_COMPLETE:
			complete++
		case droverv1.EvalStatus_EVAL_STATUS_PENDING:
			pending = true
		}
	}
	return complete, pending
}
