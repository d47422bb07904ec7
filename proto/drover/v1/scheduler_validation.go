package droverv1

import (
	"fmt"
	"time"
)

// MaxDequeueTimeout bounds how long one Dequeue call may wait.
const MaxDequeueTimeout = 10 * time.Second

// IsSchedulerType reports whether t names a scheduler (a job type).
func IsSchedulerType(t JobType) bool {
	switch t {
	case JobType_JOB_TYPE_SERVICE, JobType_JOB_TYPE_BATCH, JobType_JOB_TYPE_SYSTEM:
		return true
	}
	return false
}

// Validate checks a dequeue: known scheduler types and a bounded wait.
func (r *DequeueRequest) Validate() error {
	var v violations
	v.schedulers("schedulers", r.GetSchedulers(), true)
	if t := r.GetTimeout(); t < 0 || t > int64(MaxDequeueTimeout) {
		v.add("timeout", "must be between 0 and %s", MaxDequeueTimeout)
	}
	return v.err()
}

// Validate checks an ack or nack.
func (r *EvalTokenRequest) Validate() error {
	var v violations
	v.uuid("eval_id", r.GetEvalId())
	v.uuid("token", r.GetToken())
	return v.err()
}

// Validate checks a submitted plan's envelope; the plan applier checks its
// contents against the state.
func (r *SubmitPlanRequest) Validate() error {
	var v violations
	p := r.GetPlan()
	if p == nil {
		v.add("plan", "is required")
		return v.err()
	}
	v.uuid("plan.eval_id", p.GetEvalId())
	v.uuid("plan.eval_token", p.GetEvalToken())
	v.identifier("plan.job_id", p.GetJobId())
	for i, np := range p.GetNodePlans() {
		field := fmt.Sprintf("plan.node_plans[%d]", i)
		if np == nil {
			v.add(field, "is required")
			continue
		}
		v.uuid(field+".node_id", np.GetNodeId())
		for j, a := range np.GetAllocations() {
			if a.GetNodeId() != np.GetNodeId() {
				v.add(fmt.Sprintf("%s.allocations[%d].node_id", field, j), "must be the node plan's node")
			}
			v.uuid(fmt.Sprintf("%s.allocations[%d].id", field, j), a.GetId())
		}
		for j, s := range np.GetStops() {
			v.uuid(fmt.Sprintf("%s.stops[%d].alloc_id", field, j), s.GetAllocId())
		}
	}
	if ev := p.GetEvalUpdate(); ev != nil {
		v.workerEval("plan.eval_update", ev)
		if ev.GetId() != p.GetEvalId() {
			v.add("plan.eval_update.id", "must be the plan's eval_id")
		}
		if ev.GetJobId() != p.GetJobId() {
			v.add("plan.eval_update.job_id", "must be the plan's job_id")
		}
		if ev.GetStatus() != EvalStatus_EVAL_STATUS_COMPLETE {
			v.add("plan.eval_update.status", "must be complete: a plan carries only the outcome of an evaluation it finishes")
		}
	}
	return v.err()
}

// Validate checks an evaluation written by a worker.
func (r *EvalWriteRequest) Validate() error {
	var v violations
	v.uuid("token", r.GetToken())
	ev := r.GetEval()
	if ev == nil {
		v.add("eval", "is required")
		return v.err()
	}
	v.workerEval("eval", ev)
	return v.err()
}

// workerEval checks an evaluation a worker writes, at field.
func (v *violations) workerEval(field string, ev *Evaluation) {
	v.uuid(field+".id", ev.GetId())
	v.identifier(field+".job_id", ev.GetJobId())
	if !IsSchedulerType(ev.GetType()) {
		v.add(field+".type", "must be a scheduler type")
	}
	if ev.GetStatus() == EvalStatus_EVAL_STATUS_UNSPECIFIED {
		v.add(field+".status", "is required")
	}
}

// Validate checks a change to a server's worker pool.
func (r *UpdateSchedulerWorkersRequest) Validate() error {
	var v violations
	if r.NumWorkers != nil && (r.GetNumWorkers() < 0 || r.GetNumWorkers() > MaxSchedulerWorkers) {
		v.add("num_workers", "must be between 0 and %d", MaxSchedulerWorkers)
	}
	v.schedulers("enabled_schedulers", r.GetEnabledSchedulers(), false)
	return v.err()
}

// MaxSchedulerWorkers bounds the workers of one server.
const MaxSchedulerWorkers = 256

func (v *violations) schedulers(field string, types []JobType, required bool) {
	if required && len(types) == 0 {
		v.add(field, "must name at least one scheduler type")
	}
	seen := make(map[JobType]bool, len(types))
	for i, t := range types {
		if !IsSchedulerType(t) {
			v.add(fmt.Sprintf("%s[%d]", field, i), "%s is not a scheduler type", t)
		}
		if seen[t] {
			v.add(fmt.Sprintf("%s[%d]", field, i), "%s is given twice", t)
		}
		seen[t] = true
	}
}
