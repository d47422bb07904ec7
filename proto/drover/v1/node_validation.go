package droverv1

import "fmt"

// Validate checks an agent's registration. Server-owned node fields (status,
// eligibility, indexes, events) are not checked: the server ignores them.
func (r *RegisterNodeRequest) Validate() error {
	var v violations
	n := r.GetNode()
	if n == nil {
		v.add("node", "is required")
		return v.err()
	}
	v.uuid("node.id", n.GetId())
	v.uuid("node.secret_id", n.GetSecretId())
	v.text("node.name", n.GetName(), maxNameLen, true)
	v.identifier("node.datacenter", n.GetDatacenter())
	if n.GetNodeClass() != "" {
		v.identifier("node.node_class", n.GetNodeClass())
	}
	v.text("node.agent_version", n.GetAgentVersion(), maxNameLen, false)
	v.stringMap("node.attributes", n.GetAttributes())
	validateNodeResources(&v, n.GetResources(), n.GetReserved())
	return v.err()
}

func validateNodeResources(v *violations, res *NodeResources, reserved *NodeReservedResources) {
	if res == nil {
		v.add("node.resources", "is required")
		return
	}
	if res.GetCpuMhz() <= 0 {
		v.add("node.resources.cpu_mhz", "must be positive")
	}
	if res.GetMemoryMb() <= 0 {
		v.add("node.resources.memory_mb", "must be positive")
	}
	v.nonNegative("node.resources.disk_mb", res.GetDiskMb())
	lo, hi := res.GetMinDynamicPort(), res.GetMaxDynamicPort()
	if lo != 0 || hi != 0 {
		v.port("node.resources.min_dynamic_port", lo, false)
		v.port("node.resources.max_dynamic_port", hi, false)
		if lo > hi {
			v.add("node.resources.min_dynamic_port", "must not exceed max_dynamic_port")
		}
	}
	if reserved == nil {
		return
	}
	v.nonNegative("node.reserved.cpu_mhz", reserved.GetCpuMhz())
	v.nonNegative("node.reserved.memory_mb", reserved.GetMemoryMb())
	v.nonNegative("node.reserved.disk_mb", reserved.GetDiskMb())
	if reserved.GetCpuMhz() > res.GetCpuMhz() {
		v.add("node.reserved.cpu_mhz", "must not exceed node.resources.cpu_mhz")
	}
	if reserved.GetMemoryMb() > res.GetMemoryMb() {
		v.add("node.reserved.memory_mb", "must not exceed node.resources.memory_mb")
	}
	if len(reserved.GetPorts()) > maxListLen {
		v.add("node.reserved.ports", "must have at most %d ranges", maxListLen)
		return
	}
	for i, pr := range reserved.GetPorts() {
		field := fmt.Sprintf("node.reserved.ports[%d]", i)
		v.port(field+".first", pr.GetFirst(), false)
		v.port(field+".last", pr.GetLast(), false)
		if pr.GetFirst() > pr.GetLast() {
			v.add(field, "first must not exceed last")
		}
	}
}

// Validate checks a heartbeat. Agents may only report ready: every other
// status is decided by the servers.
func (r *UpdateNodeStatusRequest) Validate() error {
	var v violations
	v.uuid("node_id", r.GetNodeId())
	v.uuid("secret_id", r.GetSecretId())
	if r.GetStatus() != NodeStatus_NODE_STATUS_READY {
		v.add("status", "must be NODE_STATUS_READY; other statuses are set by the servers")
	}
	return v.err()
}

// Validate checks an allocation report: at least one allocation, each
// reported once, with a status an agent may report.
func (r *UpdateAllocRequest) Validate() error {
	var v violations
	v.uuid("node_id", r.GetNodeId())
	v.uuid("secret_id", r.GetSecretId())
	allocs := r.GetAllocs()
	switch {
	case len(allocs) == 0:
		v.add("allocs", "must report at least one allocation")
	case len(allocs) > maxAllocsPerCall:
		v.add("allocs", "must report at most %d allocations per call", maxAllocsPerCall)
	}
	seen := make(map[string]struct{}, len(allocs))
	for i, a := range allocs {
		field := fmt.Sprintf("allocs[%d]", i)
		if a == nil {
			v.add(field, "is required")
			continue
		}
		v.uuid(field+".alloc_id", a.GetAllocId())
		if _, dup := seen[a.GetAllocId()]; dup {
			v.add(field+".alloc_id", "is reported twice")
		}
		seen[a.GetAllocId()] = struct{}{}
		if !a.GetClientStatus().IsAgentReportable() {
			v.add(field+".client_status", "must be pending, running, complete or failed")
		}
		v.text(field+".client_description", a.GetClientDescription(), maxLongTextLen, false)
		switch {
		case a.Healthy != nil && a.GetHealthTimestamp() <= 0:
			v.add(field+".health_timestamp", "must say when the health was decided (unix nanoseconds)")
		case a.Healthy == nil && a.GetHealthTimestamp() != 0:
			v.add(field+".health_timestamp", "is set without healthy")
		}
	}
	return v.err()
}

// MaxKnownJobs bounds GetAllocsRequest.known_jobs: far more job versions
// than one node runs allocations of.
const MaxKnownJobs = 4096

// MaxKnownAllocs bounds GetAllocsRequest.known_allocs: far more
// allocations than one node holds.
const MaxKnownAllocs = 4096

// Validate checks a GetAllocs query. Any min_index and max_wait are
// accepted; max_wait is clamped by the server.
func (r *GetAllocsRequest) Validate() error {
	var v violations
	v.uuid("node_id", r.GetNodeId())
	v.uuid("secret_id", r.GetSecretId())
	if n := len(r.GetKnownJobs()); n > MaxKnownJobs {
		v.add("known_jobs", "must have at most %d entries, has %d", MaxKnownJobs, n)
	} else {
		// Checked before the field is named: an agent sends these with
		// every poll, and formatting each entry's name cost more than
		// the checks.
		for i, k := range r.GetKnownJobs() {
			if !validIdentifier(k.GetJobId()) {
				v.identifier(fmt.Sprintf("known_jobs[%d].job_id", i), k.GetJobId())
			}
		}
	}
	if n := len(r.GetKnownAllocs()); n > MaxKnownAllocs {
		v.add("known_allocs", "must have at most %d entries, has %d", MaxKnownAllocs, n)
	} else {
		for i, k := range r.GetKnownAllocs() {
			if !IsUUID(k.GetAllocId()) {
				v.uuid(fmt.Sprintf("known_allocs[%d].alloc_id", i), k.GetAllocId())
			}
		}
	}
	return v.err()
}

// Validate checks a node lookup: a full id or an id prefix.
func (r *GetNodeRequest) Validate() error {
	var v violations
	if id := r.GetNodeId(); id == "" {
		v.add("node_id", "is required")
	} else {
		v.text("node_id", id, 36, true)
	}
	return v.err()
}

// Validate checks a node list request.
func (r *ListNodesRequest) Validate() error {
	var v violations
	validatePage(&v, r.GetPage())
	return v.err()
}

// Validate checks a node usage request.
func (r *NodeUsageRequest) Validate() error {
	var v violations
	validatePage(&v, r.GetPage())
	return v.err()
}

// Validate checks an eligibility change.
func (r *UpdateNodeEligibilityRequest) Validate() error {
	var v violations
	v.uuid("node_id", r.GetNodeId())
	switch r.GetEligibility() {
	case SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE, SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE:
	default:
		v.add("eligibility", "must be SCHEDULING_ELIGIBILITY_ELIGIBLE or SCHEDULING_ELIGIBILITY_INELIGIBLE")
	}
	return v.err()
}

// Validate checks a drain change.
func (r *UpdateNodeDrainRequest) Validate() error {
	var v violations
	v.uuid("node_id", r.GetNodeId())
	v.duration("deadline", r.GetDeadline())
	if r.GetDeadline() == nil {
		// A client built before 0.3 sends the legacy field.
		v.nonNegative("deadline_ns", r.GetDeadlineNs())
	}
	deadline := r.EffectiveDeadline()
	if r.GetEnable() && r.GetMarkEligible() {
		v.add("mark_eligible", "applies only when ending a drain")
	}
	if !r.GetEnable() {
		for _, f := range []struct {
			name string
			set  bool
		}{{"deadline", deadline != 0}, {"ignore_system_jobs", r.GetIgnoreSystemJobs()}, {"force", r.GetForce()}} {
			if f.set {
				v.add(f.name, "applies only when starting a drain")
			}
		}
	}
	if r.GetForce() && deadline != 0 {
		v.add("force", "makes the deadline now; give no deadline with it")
	}
	return v.err()
}
