package gc

import (
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// The rules below decide one object each from what it refers to. They are
// the planner's half of the rules the state store enforces again when it
// applies a GCEntry.

// ages answers "is this old enough" for one planning run.
type ages struct {
	th  Thresholds
	now int64 // unix nanoseconds
}

// older reports whether time t (unix nanoseconds) lies more than d before
// now. A threshold of zero or less means any age will do.
func (g ages) older(t int64, d time.Duration) bool {
	return d <= 0 || g.now-t > int64(d)
}

// evalAge is the threshold for evaluations and allocations of a job type:
// batch work is kept longer.
func (g ages) evalAge(t droverv1.JobType) time.Duration {
	if t == droverv1.JobType_JOB_TYPE_BATCH {
		return g.th.BatchEval
	}
	return g.th.Eval
}

// allocDisposable reports whether an allocation may be deleted, age aside.
// job is the allocation's job (current version), nil when it is gone.
//
// Never while the agent may still hold its resources (not client-terminal).
// With the job gone or stopped, nothing will look at it again. For a live
// job the scheduler must not notice the deletion: finished batch work is
// counted (deleting it would run the work again), a failed allocation not
// yet replaced waits to be rescheduled, and a lost one not yet stopped
// waits for the scheduler to replace it. What the scheduler has stopped or
// replaced, and a service or system allocation that exited (replaced
// without a link, ignored from then on), may go.
func allocDisposable(a *droverv1.Allocation, job *droverv1.Job) bool {
	if !a.ClientTerminal() {
		return false
	}
	if job == nil || job.GetStop() {
		return true
	}
	complete := a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	switch {
	case complete && job.GetType() == droverv1.JobType_JOB_TYPE_BATCH:
		return false
	case a.ServerTerminal(), a.GetNextAllocation() != "", complete:
		return true
	}
	return false
}

// allocExpired reports whether an allocation is collectable on its own:
// disposable and unchanged for longer than the eval threshold of jobType.
func (g ages) allocExpired(a *droverv1.Allocation, job *droverv1.Job, jobType droverv1.JobType) bool {
	return allocDisposable(a, job) && g.older(a.GetModifyTime(), g.evalAge(jobType))
}

// evalExpired reports whether an evaluation is collectable as far as it
// alone goes: finished and unchanged for longer than its threshold. The
// allocations that name it must be collected too; the caller checks that.
func (g ages) evalExpired(ev *droverv1.Evaluation) bool {
	return ev.Terminal() && g.older(ev.GetModifyTime(), g.evalAge(ev.GetType()))
}

// nodeExpired reports whether a node is collectable: down (never merely
// disconnected) for longer than the node threshold, with every allocation
// on it terminal. A non-terminal allocation means the scheduler has not
// yet handled the node's loss.
func (g ages) nodeExpired(n *droverv1.Node, allocs []*droverv1.Allocation) bool {
	if n.GetStatus() != droverv1.NodeStatus_NODE_STATUS_DOWN || !g.older(n.GetStatusUpdatedAt(), g.th.Node) {
		return false
	}
	for _, a := range allocs {
		if !a.Terminal() {
			return false
		}
	}
	return true
}

// jobExpired reports whether a job is collectable with its allocations and
// evaluations: finished, submitted longer ago than the job threshold, every
// allocation client-terminal and no evaluation waiting to run.
func (g ages) jobExpired(j *droverv1.Job, allocs []*droverv1.Allocation, evals []*droverv1.Evaluation) bool {
	if !j.Finished() || !g.older(j.GetSubmitTime(), g.th.Job) {
		return false
	}
	for _, a := range allocs {
		if !a.ClientTerminal() {
			return false
		}
	}
	for _, ev := range evals {
		switch ev.GetStatus() {
		case droverv1.EvalStatus_EVAL_STATUS_PENDING, droverv1.EvalStatus_EVAL_STATUS_BLOCKED:
			return false
		}
	}
	return true
}
