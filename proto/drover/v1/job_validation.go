package droverv1

import (
	"fmt"
	"regexp"
)

// Validate checks a job submission. The job must have been canonicalized.
func (r *RegisterJobRequest) Validate() error {
	var v violations
	if r.GetJob() == nil {
		v.add("job", "is required")
		return v.err()
	}
	validateJob(&v, r.GetJob())
	validateRequestID(&v, r.GetRequestId())
	return v.err()
}

// maxRequestIDLen bounds a client's idempotency key.
const maxRequestIDLen = 128

// validateRequestID checks an optional idempotency key: at most
// maxRequestIDLen bytes of printable ASCII without spaces.
func validateRequestID(v *violations, id string) {
	if len(id) > maxRequestIDLen {
		v.add("request_id", "must be at most %d bytes", maxRequestIDLen)
		return
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			v.add("request_id", "must be printable ASCII without spaces (byte %d is %#02x)", i, c)
			return
		}
	}
}

func validateJob(v *violations, j *Job) {
	v.identifier("job.id", j.GetId())
	v.text("job.name", j.GetName(), maxNameLen, false)
	v.enum("job.type", int32(j.GetType()), JobType_name)
	if p := j.GetPriority(); p < 1 || p > maxPriority {
		v.add("job.priority", "must be from 1 to %d", maxPriority)
	}
	switch n := len(j.GetDatacenters()); {
	case n == 0:
		v.add("job.datacenters", "must name at least one datacenter")
	case n > maxListLen:
		v.add("job.datacenters", "must name at most %d datacenters", maxListLen)
	}
	for i, dc := range j.GetDatacenters() {
		v.identifier(fmt.Sprintf("job.datacenters[%d]", i), dc)
	}
	validateConstraints(v, "job.constraints", j.GetConstraints())
	v.stringMap("job.meta", j.GetMeta())
	switch n := len(j.GetTaskGroups()); {
	case n == 0:
		v.add("job.task_groups", "must have at least one task group")
	case n > maxJobTaskGroups:
		v.add("job.task_groups", "must have at most %d task groups", maxJobTaskGroups)
	}
	names := make(map[string]struct{})
	for i, tg := range j.GetTaskGroups() {
		field := fmt.Sprintf("job.task_groups[%d]", i)
		if tg == nil {
			v.add(field, "is required")
			continue
		}
		if _, dup := names[tg.GetName()]; dup {
			v.add(field+".name", "%q is used by another task group", tg.GetName())
		}
		names[tg.GetName()] = struct{}{}
		validateTaskGroup(v, field, j.GetType(), tg)
	}
	validateUpdate(v, "job.update", j.GetType(), j.GetUpdate())
	validateAutoPromote(v, j.GetTaskGroups())
}

func validateTaskGroup(v *violations, field string, jobType JobType, tg *TaskGroup) {
	v.identifier(field+".name", tg.GetName())
	if c := tg.GetCount(); c < 0 || c > maxGroupCount {
		v.add(field+".count", "must be from 0 to %d", maxGroupCount)
	}
	validateResources(v, field+".resources", tg.GetResources())
	validateConstraints(v, field+".constraints", tg.GetConstraints())
	validateSpreads(v, field+".spreads", tg.GetSpreads())
	v.duration(field+".max_client_disconnect", tg.GetMaxClientDisconnect())
	stopAfter := v.duration(field+".stop_after_client_disconnect", tg.GetStopAfterClientDisconnect())
	if jobType == JobType_JOB_TYPE_SYSTEM && stopAfter != 0 {
		v.add(field+".stop_after_client_disconnect", "is not supported for system jobs")
	}
	v.enum(field+".reconnect_strategy", int32(tg.GetReconnectStrategy()), ReconnectStrategy_name)
	if m := tg.GetMigrate(); m != nil {
		switch {
		case jobType != JobType_JOB_TYPE_SERVICE:
			// Batch work finishes where it runs unless the deadline comes;
			// system work leaves last, all at once.
			v.add(field+".migrate", "applies only to service jobs")
		case m.GetMaxParallel() < 1 || m.GetMaxParallel() > maxGroupCount:
			v.add(field+".migrate.max_parallel", "must be from 1 to %d", maxGroupCount)
		}
	}
	if rp := tg.GetReschedulePolicy(); rp != nil {
		validateReschedulePolicy(v, field+".reschedule_policy", rp)
	}
	validateUpdate(v, field+".update", jobType, tg.GetUpdate())
	v.stringMap(field+".meta", tg.GetMeta())
	if len(tg.GetTasks()) > maxListLen {
		v.add(field+".tasks", "must have at most %d tasks", maxListLen)
		return
	}
	tasks := make(map[string]struct{})
	for i, t := range tg.GetTasks() {
		tf := fmt.Sprintf("%s.tasks[%d]", field, i)
		if t == nil {
			v.add(tf, "is required")
			continue
		}
		v.identifier(tf+".name", t.GetName())
		if _, dup := tasks[t.GetName()]; dup {
			v.add(tf+".name", "%q is used by another task", t.GetName())
		}
		tasks[t.GetName()] = struct{}{}
		v.identifier(tf+".driver", t.GetDriver())
		v.stringMap(tf+".config", t.GetConfig())
		v.stringMap(tf+".env", t.GetEnv())
	}
}

func validateResources(v *violations, field string, r *Resources) {
	if r == nil {
		v.add(field, "is required")
		return
	}
	if r.GetCpuMhz() <= 0 {
		v.add(field+".cpu_mhz", "must be positive")
	}
	if r.GetMemoryMb() <= 0 {
		v.add(field+".memory_mb", "must be positive")
	}
	v.nonNegative(field+".disk_mb", r.GetDiskMb())
	if len(r.GetPorts()) > maxListLen {
		v.add(field+".ports", "must have at most %d ports", maxListLen)
		return
	}
	labels := make(map[string]struct{})
	static := make(map[int32]struct{})
	for i, p := range r.GetPorts() {
		pf := fmt.Sprintf("%s.ports[%d]", field, i)
		if p == nil {
			v.add(pf, "is required")
			continue
		}
		v.identifier(pf+".label", p.GetLabel())
		if _, dup := labels[p.GetLabel()]; dup {
			v.add(pf+".label", "%q is used by another port", p.GetLabel())
		}
		labels[p.GetLabel()] = struct{}{}
		v.port(pf+".value", p.GetValue(), true)
		if p.GetValue() != 0 {
			if _, dup := static[p.GetValue()]; dup {
				v.add(pf+".value", "static port %d is asked for twice", p.GetValue())
			}
			static[p.GetValue()] = struct{}{}
		}
	}
}

// operatorsWithoutValue are the constraint operators that ignore value.
var operatorsWithoutValue = map[ConstraintOperator]bool{
	ConstraintOperator_CONSTRAINT_OPERATOR_IS_SET:         true,
	ConstraintOperator_CONSTRAINT_OPERATOR_IS_NOT_SET:     true,
	ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS: true,
}

func validateConstraints(v *violations, field string, cs []*Constraint) {
	if len(cs) > maxListLen {
		v.add(field, "must have at most %d constraints", maxListLen)
		return
	}
	for i, c := range cs {
		cf := fmt.Sprintf("%s[%d]", field, i)
		if c == nil {
			v.add(cf, "is required")
			continue
		}
		op := c.GetOperator()
		v.enum(cf+".operator", int32(op), ConstraintOperator_name)
		if op != ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS {
			v.text(cf+".attribute", c.GetAttribute(), maxMapKeyLen, true)
		}
		if !operatorsWithoutValue[op] {
			v.text(cf+".value", c.GetValue(), maxMapValueLen, true)
		}
		if op == ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP {
			if _, err := regexp.Compile(c.GetValue()); err != nil {
				v.add(cf+".value", "is not a valid regular expression: %v", err)
			}
		}
	}
}

func validateSpreads(v *violations, field string, spreads []*Spread) {
	if len(spreads) > maxListLen {
		v.add(field, "must have at most %d spreads", maxListLen)
		return
	}
	for i, s := range spreads {
		sf := fmt.Sprintf("%s[%d]", field, i)
		if s == nil {
			v.add(sf, "is required")
			continue
		}
		v.text(sf+".attribute", s.GetAttribute(), maxMapKeyLen, true)
		if w := s.GetWeight(); w < 1 || w > maxSpreadWeight {
			v.add(sf+".weight", "must be from 1 to %d", maxSpreadWeight)
		}
		if len(s.GetTargets()) > maxListLen {
			v.add(sf+".targets", "must have at most %d targets", maxListLen)
			continue
		}
		var sum int32
		values := make(map[string]struct{})
		for j, t := range s.GetTargets() {
			tf := fmt.Sprintf("%s.targets[%d]", sf, j)
			if t == nil {
				v.add(tf, "is required")
				continue
			}
			v.text(tf+".value", t.GetValue(), maxMapValueLen, true)
			if _, dup := values[t.GetValue()]; dup {
				v.add(tf+".value", "%q has two targets", t.GetValue())
			}
			values[t.GetValue()] = struct{}{}
			if p := t.GetPercent(); p < 0 || p > maxPercent {
				v.add(tf+".percent", "must be from 0 to %d", maxPercent)
			}
			sum += t.GetPercent()
		}
		if sum > maxPercent {
			v.add(sf+".targets", "percentages must sum to at most %d, not %d", maxPercent, sum)
		}
	}
}

func validateReschedulePolicy(v *violations, field string, rp *ReschedulePolicy) {
	if rp.GetAttempts() < 0 {
		v.add(field+".attempts", "must not be negative")
	}
	interval := v.duration(field+".interval", rp.GetInterval())
	delay := v.duration(field+".delay", rp.GetDelay())
	maxDelay := v.duration(field+".max_delay", rp.GetMaxDelay())
	v.enum(field+".delay_function", int32(rp.GetDelayFunction()), DelayFunction_name)
	if rp.GetDelayFunction() == DelayFunction_DELAY_FUNCTION_EXPONENTIAL && maxDelay < delay {
		v.add(field+".max_delay", "must be at least delay for an exponential delay")
	}
	if !rp.GetUnlimited() && rp.GetAttempts() > 0 && interval <= 0 {
		v.add(field+".interval", "must be positive when attempts are limited")
	}
}

// Validate checks a job stop request.
func (r *DeregisterJobRequest) Validate() error {
	var v violations
	v.identifier("job_id", r.GetJobId())
	validateRequestID(&v, r.GetRequestId())
	return v.err()
}

// Validate checks a request for a job's versions.
func (r *JobVersionsRequest) Validate() error {
	var v violations
	v.identifier("job_id", r.GetJobId())
	return v.err()
}

// Validate checks a revert.
func (r *RevertJobRequest) Validate() error {
	var v violations
	v.identifier("job_id", r.GetJobId())
	validateRequestID(&v, r.GetRequestId())
	return v.err()
}

// Validate checks a job read.
func (r *GetJobRequest) Validate() error {
	var v violations
	v.identifier("job_id", r.GetJobId())
	return v.err()
}

// Validate checks a job list request.
func (r *ListJobsRequest) Validate() error {
	var v violations
	validatePage(&v, r.GetPage())
	return v.err()
}

// Validate checks a request for a job's allocations.
func (r *ListJobAllocationsRequest) Validate() error {
	var v violations
	v.identifier("job_id", r.GetJobId())
	validatePage(&v, r.GetPage())
	return v.err()
}

// Validate checks a request for a job's evaluations.
func (r *ListJobEvaluationsRequest) Validate() error {
	var v violations
	v.identifier("job_id", r.GetJobId())
	validatePage(&v, r.GetPage())
	return v.err()
}

// Validate checks an allocation read.
func (r *GetAllocationRequest) Validate() error {
	var v violations
	v.uuid("alloc_id", r.GetAllocId())
	return v.err()
}

// Validate checks an allocation list request.
func (r *ListAllocationsRequest) Validate() error {
	var v violations
	validatePage(&v, r.GetPage())
	return v.err()
}

// Validate checks an evaluation read.
func (r *GetEvaluationRequest) Validate() error {
	var v violations
	v.uuid("eval_id", r.GetEvalId())
	return v.err()
}

// Validate checks an evaluation list request.
func (r *ListEvaluationsRequest) Validate() error {
	var v violations
	validatePage(&v, r.GetPage())
	return v.err()
}

// Validate checks an event subscription.
func (r *StreamEventsRequest) Validate() error {
	var v violations
	if len(r.GetTopics()) > maxEventKeysTopic {
		v.add("topics", "must name at most %d topics", maxEventKeysTopic)
	}
	for i, t := range r.GetTopics() {
		v.enum(fmt.Sprintf("topics[%d]", i), int32(t), Topic_name)
	}
	if len(r.GetKeys()) > maxEventKeysTopic {
		v.add("keys", "must name at most %d keys", maxEventKeysTopic)
	}
	for i, k := range r.GetKeys() {
		v.text(fmt.Sprintf("keys[%d]", i), k, maxNameLen, true)
	}
	return v.err()
}

// DefaultPageSize is the size of a list page that does not set one.
const DefaultPageSize = 1000

func validatePage(v *violations, p *PageOptions) {
	if p == nil {
		return
	}
	if s := p.GetPageSize(); s < 0 || s > maxPageSize {
		v.add("page.page_size", "must be from 0 to %d", maxPageSize)
	}
	v.text("page.prefix", p.GetPrefix(), maxNameLen, false)
	v.text("page.next_token", p.GetNextToken(), maxNameLen, false)
}

// Validate checks a deployment read.
func (r *GetDeploymentRequest) Validate() error {
	var v violations
	v.uuid("deployment_id", r.GetDeploymentId())
	return v.err()
}

// Validate checks a deployment listing.
func (r *ListDeploymentsRequest) Validate() error {
	var v violations
	if r.GetJobId() != "" {
		v.identifier("job_id", r.GetJobId())
	}
	validatePage(&v, r.GetPage())
	return v.err()
}

// Validate checks a promotion.
func (r *PromoteDeploymentRequest) Validate() error {
	var v violations
	v.uuid("deployment_id", r.GetDeploymentId())
	if len(r.GetGroups()) > maxJobTaskGroups {
		v.add("groups", "must name at most %d groups", maxJobTaskGroups)
	}
	for i, g := range r.GetGroups() {
		v.identifier(fmt.Sprintf("groups[%d]", i), g)
	}
	return v.err()
}

// Validate checks a pause or resume.
func (r *PauseDeploymentRequest) Validate() error {
	var v violations
	v.uuid("deployment_id", r.GetDeploymentId())
	return v.err()
}

// Validate checks a failure.
func (r *FailDeploymentRequest) Validate() error {
	var v violations
	v.uuid("deployment_id", r.GetDeploymentId())
	return v.err()
}
