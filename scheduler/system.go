package scheduler

import (
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// reconcileSystem decides a system job's placements and stops: one
// allocation per node the job may run on.
func (g *genericScheduler) reconcileSystem(ec *evalContext, eval *droverv1.Evaluation, job *droverv1.Job) *reconcileResult {
	allocs, _ := g.state.AllocsByJob(eval.GetJobId())
	eligible := make(map[string]*droverv1.Node)
	if job != nil && !job.GetStop() {
		for n := range g.state.Nodes() {
			if systemEligible(n, job) {
				eligible[n.GetId()] = n
			}
		}
	}
	tainted := make(map[string]*droverv1.Node)
	for _, a := range allocs {
		id := a.GetNodeId()
		if _, ok := eligible[id]; ok {
			continue
		}
		if _, seen := tainted[id]; !seen {
			tainted[id] = g.state.NodeByID(id)
		}
	}
	return reconcileSystem(job, func(v uint64) *droverv1.Job { return g.state.JobVersion(eval.GetJobId(), v) },
		allocs, eligible, tainted, eval.GetId(), ec.now())
}

// systemEligible reports whether a system job should have an allocation on
// the node: the node takes new work and is in one of the job's
// datacenters. Constraints and resources are the stack's to check.
func systemEligible(n *droverv1.Node, job *droverv1.Job) bool {
	return n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_READY &&
		n.GetSchedulingEligibility() != droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE &&
		n.GetDrainStrategy() == nil &&
		slices.Contains(job.GetDatacenters(), n.GetDatacenter())
}
