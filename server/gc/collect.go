package gc

import (
	"maps"
	"slices"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// set is a set of ids.
type set map[string]struct{}

func (s set) add(id string)      { s[id] = struct{}{} }
func (s set) has(id string) bool { _, ok := s[id]; return ok }
func (s set) sorted() []string   { return slices.Sorted(maps.Keys(s)) }
func (s set) addAll(ids ...string) {
	for _, id := range ids {
		s.add(id)
	}
}

// garbage is what one planning run found collectable.
type garbage struct {
	nodes, allocs, evals, jobs set
	versions                   []*droverv1.JobVersionRef
}

// collector walks a snapshot once per rule and fills in garbage.
type collector struct {
	snap *state.Snapshot
	ages ages
	// jobs holds every current job by id: allocations look theirs up.
	jobs map[string]*droverv1.Job
	out  garbage
}

// collect finds everything collectable in snap at now (unix nanoseconds).
// Jobs go first, since they take their allocations and evaluations with
// them regardless of age; then nodes, lone allocations, evaluations (which
// need the final set of allocations) and versions of the jobs that stay.
func collect(snap *state.Snapshot, th Thresholds, now int64) *garbage {
	c := &collector{
		snap: snap,
		ages: ages{th: th, now: now},
		jobs: make(map[string]*droverv1.Job),
		out:  garbage{nodes: set{}, allocs: set{}, evals: set{}, jobs: set{}},
	}
	for j := range snap.Jobs() {
		c.jobs[j.GetId()] = j
	}
	c.collectJobs()
	c.collectNodes()
	c.collectAllocs()
	c.collectEvals()
	c.collectVersions()
	return &c.out
}

// collectJobs takes finished jobs with all their allocations and
// evaluations.
func (c *collector) collectJobs() {
	for _, j := range c.jobs {
		allocs, _ := c.snap.AllocsByJob(j.GetId())
		evals := slices.Collect(c.snap.EvalsByJob(j.GetId()))
		if !c.ages.jobExpired(j, allocs, evals) {
			continue
		}
		c.out.jobs.add(j.GetId())
		for _, a := range allocs {
			c.out.allocs.add(a.GetId())
		}
		for _, ev := range evals {
			c.out.evals.add(ev.GetId())
		}
	}
}

// collectNodes takes nodes that stayed down, with those of their
// allocations that may go whatever their age. The others (stopped but not
// yet client-terminal, or kept for the scheduler) outlive the node and are
// collected by a later round.
func (c *collector) collectNodes() {
	for n := range c.snap.Nodes() {
		allocs, _ := c.snap.AllocsByNode(n.GetId())
		if !c.ages.nodeExpired(n, allocs) {
			continue
		}
		c.out.nodes.add(n.GetId())
		for _, a := range allocs {
			if allocDisposable(a, c.jobs[a.GetJobId()]) {
				c.out.allocs.add(a.GetId())
			}
		}
	}
}

// collectAllocs takes the allocations collectable on their own.
func (c *collector) collectAllocs() {
	for a := range c.snap.Allocs() {
		if c.out.allocs.has(a.GetId()) {
			continue
		}
		job := c.jobs[a.GetJobId()]
		if c.ages.allocExpired(a, job, c.jobType(a, job)) {
			c.out.allocs.add(a.GetId())
		}
	}
}

// jobType is the type of an allocation's job, from its evaluation once the
// job is gone; service (the shorter threshold) when neither is left.
func (c *collector) jobType(a *droverv1.Allocation, job *droverv1.Job) droverv1.JobType {
	if job != nil {
		return job.GetType()
	}
	if ev := c.snap.EvalByID(a.GetEvalId()); ev != nil {
		return ev.GetType()
	}
	return droverv1.JobType_JOB_TYPE_SERVICE
}

// collectEvals takes finished evaluations that no remaining allocation
// names, as the evaluation that placed or changed it or as its follow-up.
func (c *collector) collectEvals() {
	named := set{}
	for a := range c.snap.Allocs() {
		if !c.out.allocs.has(a.GetId()) {
			named.addAll(a.GetEvalId(), a.GetFollowupEvalId())
		}
	}
	for ev := range c.snap.Evals() {
		if !named.has(ev.GetId()) && c.ages.evalExpired(ev) {
			c.out.evals.add(ev.GetId())
		}
	}
}

// collectVersions takes the old versions of the jobs that stay that no
// remaining allocation runs.
func (c *collector) collectVersions() {
	for _, id := range slices.Sorted(maps.Keys(c.jobs)) {
		if c.out.jobs.has(id) {
			continue
		}
		allocs, _ := c.snap.AllocsByJob(id)
		inUse := make(map[uint64]bool)
		for _, a := range allocs {
			if !c.out.allocs.has(a.GetId()) {
				inUse[a.GetJobVersion()] = true
			}
		}
		var versions []uint64
		for v := range c.snap.JobVersions(id) {
			versions = append(versions, v.GetVersion())
		}
		for _, v := range prunableVersions(versions, c.jobs[id].GetVersion(), inUse) {
			c.out.versions = append(c.out.versions, &droverv1.JobVersionRef{JobId: id, Version: v})
		}
	}
}

// prunableVersions returns, in ascending order, the versions beyond the
// newest KeepJobVersions that are neither current nor in use.
func prunableVersions(versions []uint64, current uint64, inUse map[uint64]bool) []uint64 {
	newestFirst := slices.Sorted(slices.Values(versions))
	slices.Reverse(newestFirst)
	if len(newestFirst) <= KeepJobVersions {
		return nil
	}
	var out []uint64
	for _, v := range newestFirst[KeepJobVersions:] {
		if v != current && !inUse[v] {
			out = append(out, v)
		}
	}
	slices.Reverse(out)
	return out
}
