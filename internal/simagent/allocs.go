package simagent

import (
	"hash/fnv"
	"strconv"
	"sync"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// simAlloc is what an agent knows of one of its allocations.
type simAlloc struct {
	// status is what the allocation does here; reported is the last
	// status the servers acknowledged, at raft index ackIndex.
	status   droverv1.AllocClientStatus
	reported droverv1.AllocClientStatus
	ackIndex uint64
	batch    bool
	// fails makes the allocation fail where it would run (service) or
	// complete (batch): see Fails.
	fails bool
	// next is when status moves on by itself (unix nanoseconds), 0 never.
	next int64

	// For an allocation of a deployment (deploymentID): its health as the
	// agent decided it and as the servers acknowledged it, when it will be
	// decided (0: not yet running, or decided), how long after it starts
	// running, and whether it will turn out unhealthy (UnhealthyMetaKey).
	deploymentID        string
	health, healthAcked health
	healthAt            int64
	healthDelay         int64
	unhealthy           bool
	healthTime          int64
}

// health is an allocation's deployment health as an agent sees it.
type health int8

const (
	healthUndecided health = iota
	healthHealthy
	healthUnhealthy
)

func (a *simAlloc) dirty() bool { return a.status != a.reported || a.health != a.healthAcked }

// inDeployment reports whether the agent reports the allocation's health.
func (a *simAlloc) inDeployment() bool { return a.deploymentID != "" }

// allocSet is an agent's allocations and the simulated life of each: pending
// once the servers place it, running after startDelay, complete after
// batchRun for batch work or once the servers want it stopped. It only
// decides; the agent calls the servers.
type allocSet struct {
	startDelay  int64
	batchRun    int64
	failureRate float64
	// healthDelay, when positive, is how long after it starts running an
	// allocation of a deployment has its health decided, instead of its
	// group's min_healthy_time.
	healthDelay int64

	mu sync.Mutex
	m  map[string]*simAlloc
	// live holds the allocations of m that may call for something: a
	// report, a move at a time to come, a health to decide, or collection
	// once finished. The others are settled (see quiet): they run as they
	// are until an answer or a resync changes them, so that the walks of
	// apply, advance and reports cost what changes, not what a node holds.
	// settled counts those by status.
	live    map[string]*simAlloc
	settled [numClientStatuses]int
	// jobs are the job versions the answers carried that its allocations
	// still run; the servers leave out of an answer those the agent holds.
	jobs map[jobVersionKey]*droverv1.Job
	// seen is the servers' view of the node's allocations as of the last
	// answer, each with the job version it runs, and knownIndex that
	// answer's state_index. The next GetAllocs names the index and how
	// many allocations it held, so that the servers send only those
	// written after it. runs counts the allocations of seen per job
	// version.
	seen       map[string]jobVersionKey
	runs       map[jobVersionKey]int
	knownIndex uint64
	// statuses counts the allocations of m by status as of the last change
	// to m (see tallyLocked), so that counting a fleet's allocations costs
	// a read per agent. It could be derived from settled and a walk of
	// live, but in the full C1M that walk (about 100,000 allocations over
	// the fleet, each a cache miss) took 10 ms per count against 0.1 ms.
	statuses [numClientStatuses]int
}

// numClientStatuses bounds the droverv1.AllocClientStatus values an
// allocSet counts; a status beyond it is counted as unspecified.
const numClientStatuses = int(droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN) + 1

func newAllocSet(startDelay, batchRun int64, failureRate float64, healthDelay int64) *allocSet {
	return &allocSet{startDelay: startDelay, batchRun: batchRun, failureRate: failureRate, healthDelay: healthDelay,
		m: make(map[string]*simAlloc), live: make(map[string]*simAlloc),
		jobs: make(map[jobVersionKey]*droverv1.Job), seen: make(map[string]jobVersionKey), runs: make(map[jobVersionKey]int)}
}

// known returns the state_index of the last answer and how many
// allocations the agent holds from it, for GetAllocs.
func (s *allocSet) known() (index uint64, count uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.knownIndex, uint32(len(s.seen))
}

// change says what an update of the set calls for: whether there are
// reports to send, and when the set next moves on by itself (0 never).
type change struct {
	dirty bool
	next  int64
}

// apply merges the servers' view of the node's allocations at time now:
// those the answer sends, and the rest the agent holds unchanged, which
// need nothing done again. An answer relative to the agent's known index
// leaves those out; a whole one names them, and what it neither sends nor
// names was collected. The answer's job versions join those held from
// earlier answers; versions no allocation of the node runs are dropped.
func (s *allocSet) apply(resp *droverv1.GetAllocsResponse, now int64) change {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Job versions that may have lost their last allocation here.
	var unused []jobVersionKey
	for _, j := range resp.GetJobs() {
		k := jobVersionKey{j.GetId(), j.GetVersion()}
		s.jobs[k] = j
		unused = append(unused, k)
	}
	if !resp.GetSinceKnownIndex() {
		seen := make(map[string]jobVersionKey, len(resp.GetAllocs())+len(resp.GetUnchangedAllocIds()))
		for _, id := range resp.GetUnchangedAllocIds() {
			if k, ok := s.seen[id]; ok {
				seen[id] = k
			}
		}
		s.seen = seen
		clear(s.runs)
		for _, k := range seen {
			s.runs[k]++
		}
		for k := range s.jobs {
			unused = append(unused, k)
		}
	}
	for _, a := range resp.GetAllocs() {
		k := jobVersionKey{a.GetJobId(), a.GetJobVersion()}
		if old, ok := s.seen[a.GetId()]; ok {
			s.runs[old]--
			unused = append(unused, old)
		}
		s.seen[a.GetId()] = k
		s.runs[k]++
		s.merge(a, s.jobs[k], now)
	}
	s.knownIndex = resp.GetStateIndex()
	for _, k := range unused {
		if s.runs[k] <= 0 {
			delete(s.runs, k)
			delete(s.jobs, k)
		}
	}
	for id, a := range s.live {
		// Collected by the servers after this agent's final report.
		if _, present := s.seen[id]; !present && a.status.IsClientTerminal() && !a.dirty() {
			s.dropLocked(id)
		}
	}
	return s.changeLocked(now)
}

type jobVersionKey struct {
	id      string
	version uint64
}

// merge applies one allocation as the servers see it; job is the version
// it runs, nil if the answer lacked it.
func (s *allocSet) merge(a *droverv1.Allocation, job *droverv1.Job, now int64) {
	batch := job.GetType() == droverv1.JobType_JOB_TYPE_BATCH
	id := a.GetId()
	local := s.m[id]
	if local != nil {
		s.unsettleLocked(id, local)
		defer s.settleLocked(id, local)
		if !a.ServerTerminal() {
			s.followDeployment(local, a, job, now)
		}
	}
	switch {
	case a.ClientTerminal():
		// Finished by this agent's report, or lost while the node was
		// away (the servers replaced it; the agent stops it).
		s.dropLocked(id)
	case local == nil && a.ServerTerminal():
		// Stopped before this agent started it.
		s.addLocked(id, &simAlloc{status: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, batch: batch})
	case local == nil:
		local = s.adopt(a, batch, now)
		s.followDeployment(local, a, job, now)
		s.addLocked(id, local)
	case a.ServerTerminal():
		if !local.status.IsClientTerminal() {
			local.status, local.next = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, 0
		}
	case !local.dirty() && a.GetModifyIndex() >= local.ackIndex && a.GetClientStatus() != local.status:
		// The servers' view differs from what they acknowledged (they
		// marked it unknown while the node was away): say it again. An
		// answer older than the acknowledgement proves nothing.
		local.reported = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED
	}
}

// followDeployment starts deciding the health of an allocation that joined
// a deployment (placed into it, or moved into a new one in place).
func (s *allocSet) followDeployment(local *simAlloc, a *droverv1.Allocation, job *droverv1.Job, now int64) {
	if a.GetDeploymentId() == local.deploymentID {
		return
	}
	local.deploymentID = a.GetDeploymentId()
	local.health, local.healthAcked, local.healthAt, local.healthTime = healthUndecided, healthUndecided, 0, 0
	if local.deploymentID == "" {
		return
	}
	if known := reportedHealth(a); known != nil {
		// Decided and reported before (by this agent before a restart).
		local.health = healthUnhealthy
		if *known {
			local.health = healthHealthy
		}
		local.healthAcked = local.health
		return
	}
	local.healthDelay = s.healthDelay
	if local.healthDelay <= 0 {
		local.healthDelay = int64(job.LookupTaskGroup(a.GetTaskGroup()).GetUpdate().GetMinHealthyTime().AsDuration())
	}
	local.unhealthy = Fails(a.GetId()+"/health", unhealthyFraction(job))
	if local.status == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING {
		local.healthAt = now + local.healthDelay
	}
}

// reportedHealth is the health the servers hold for the allocation, nil
// while undecided.
func reportedHealth(a *droverv1.Allocation) *bool {
	if st := a.GetDeploymentStatus(); st != nil {
		return st.Healthy
	}
	return nil
}

// UnhealthyMetaKey is the job meta key that makes simulated agents report
// a share of a job version's deployment allocations unhealthy: its value
// is that share, from 0 to 1 ("0.5"). A version without it is healthy; a
// test or a demo registers a version with it to roll out a bad version on
// purpose. Real agents ignore it.
const UnhealthyMetaKey = "drover.sim.unhealthy_fraction"

// unhealthyFraction reads UnhealthyMetaKey from the job, 0 if absent or
// not a number from 0 to 1.
func unhealthyFraction(job *droverv1.Job) float64 {
	v, err := strconv.ParseFloat(job.GetMeta()[UnhealthyMetaKey], 64)
	if err != nil || v < 0 || v > 1 {
		return 0
	}
	return v
}

// adopt starts tracking an allocation the agent has not seen: a new one
// starts pending; one the servers already believe runs (an agent that
// restarted) runs, and is reported again if the servers doubt it. A new
// one the servers hold as pending, as they place it, needs no report until
// it starts: reporting pending would only echo what they hold, a call per
// placement that changes nothing.
func (s *allocSet) adopt(a *droverv1.Allocation, batch bool, now int64) *simAlloc {
	local := &simAlloc{batch: batch, fails: Fails(a.GetId(), s.failureRate)}
	switch a.GetClientStatus() {
	case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING:
		local.status, local.reported, local.ackIndex = a.GetClientStatus(), a.GetClientStatus(), a.GetModifyIndex()
		s.runFrom(local, now)
	case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN:
		local.status = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
		s.runFrom(local, now)
	case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING:
		local.status, local.reported, local.ackIndex = a.GetClientStatus(), a.GetClientStatus(), a.GetModifyIndex()
		local.next = now + s.startDelay
	default:
		local.status = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
		local.next = now + s.startDelay
	}
	return local
}

// runFrom makes a running allocation finish after the batch run time, if
// it is batch work.
func (s *allocSet) runFrom(a *simAlloc, now int64) {
	a.next = 0
	if a.batch {
		a.next = now + s.batchRun
	}
	if a.inDeployment() && a.health == healthUndecided {
		a.healthAt = now + a.healthDelay
	}
}

// decideHealth decides the health of a running allocation of a deployment
// once its time has come, and marks a failed one unhealthy at once.
func (a *simAlloc) decideHealth(now int64) {
	if !a.inDeployment() || a.health != healthUndecided {
		return
	}
	switch {
	case a.status == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED:
		a.health, a.healthTime, a.healthAt = healthUnhealthy, now, 0
	case a.status == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING && a.healthAt != 0 && a.healthAt <= now:
		a.health, a.healthTime, a.healthAt = healthHealthy, now, 0
		if a.unhealthy {
			a.health = healthUnhealthy
		}
	}
}

// advance moves on every allocation whose time has come.
func (s *allocSet) advance(now int64) change {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, a := range s.live {
		s.advanceOne(a, now)
		s.settleLocked(id, a)
	}
	return s.changeLocked(now)
}

// advanceOne moves one allocation on if its time has come.
func (s *allocSet) advanceOne(a *simAlloc, now int64) {
	a.decideHealth(now)
	if a.next == 0 || a.next > now {
		return
	}
	switch a.status {
	case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING:
		if a.fails && !a.batch {
			a.status, a.next = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED, 0
			a.decideHealth(now)
			return
		}
		a.status = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
		s.runFrom(a, now)
	case droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING:
		a.status, a.next = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, 0
		if a.fails {
			a.status = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
		}
	default:
		a.next = 0
	}
	a.decideHealth(now)
}

// Fails reports whether the allocation id fails with failure rate rate:
// whether its hash (FNV-1a, its bits mixed by murmur3's finalizer so that
// similar ids spread), as a fraction of 2^64, is below rate.
func Fails(id string, rate float64) bool {
	switch {
	case rate <= 0:
		return false
	case rate >= 1:
		return true
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return float64(x) < rate*(1<<64)
}

// changeLocked says what the set's allocations call for after a change
// to them, and counts them again by status.
func (s *allocSet) changeLocked(now int64) change {
	var c change
	s.statuses = s.settled
	for _, a := range s.live {
		s.statuses[statusSlot(a.status)]++
		c.dirty = c.dirty || a.dirty()
		for _, t := range []int64{a.next, a.healthAt} {
			if t != 0 && (c.next == 0 || t < c.next) {
				c.next = t
			}
		}
	}
	if c.next != 0 {
		c.next = max(c.next, now)
	}
	return c
}

// reports returns the changes the servers have not acknowledged.
func (s *allocSet) reports() []*droverv1.AllocClientUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*droverv1.AllocClientUpdate
	for id, a := range s.live {
		if a.dirty() {
			u := &droverv1.AllocClientUpdate{AllocId: id, ClientStatus: a.status}
			if a.health != healthUndecided {
				healthy := a.health == healthHealthy
				u.Healthy, u.HealthTimestamp = &healthy, a.healthTime
			}
			out = append(out, u)
		}
	}
	return out
}

// acked records reports the servers wrote at index, and forgets the
// allocations they no longer know. It returns whether changes remain.
func (s *allocSet) acked(sent []*droverv1.AllocClientUpdate, index uint64, unknown []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range sent {
		id := u.GetAllocId()
		a := s.m[id]
		if a == nil {
			continue
		}
		s.unsettleLocked(id, a)
		if a.status == u.GetClientStatus() {
			a.reported, a.ackIndex = a.status, index
		}
		if u.Healthy != nil && (a.health == healthHealthy) == u.GetHealthy() {
			a.healthAcked = a.health
		}
		s.settleLocked(id, a)
	}
	for _, id := range unknown {
		s.dropLocked(id)
	}
	if len(unknown) > 0 {
		s.tallyLocked()
	}
	return s.hasReportsLocked()
}

// tallyLocked counts the allocations again by status after some left the
// set outside apply and advance, which count them as they end.
func (s *allocSet) tallyLocked() {
	s.statuses = s.settled
	for _, a := range s.live {
		s.statuses[statusSlot(a.status)]++
	}
}

// quiet reports whether an allocation calls for nothing until something
// changes it: acknowledged as it is, no move or health decision to come,
// and not finished (a finished one waits to be collected).
func (a *simAlloc) quiet() bool {
	return !a.dirty() && a.next == 0 && a.healthAt == 0 && !a.status.IsClientTerminal() &&
		(!a.inDeployment() || a.health != healthUndecided)
}

// addLocked puts a new allocation in the set.
func (s *allocSet) addLocked(id string, a *simAlloc) {
	s.m[id] = a
	s.live[id] = a
	s.settleLocked(id, a)
}

// dropLocked removes an allocation from the set.
func (s *allocSet) dropLocked(id string) {
	a, ok := s.m[id]
	if !ok {
		return
	}
	if _, live := s.live[id]; !live {
		s.settled[statusSlot(a.status)]--
	}
	delete(s.m, id)
	delete(s.live, id)
}

// unsettleLocked makes a settled allocation live again before something
// changes it; a live one stays as it is.
func (s *allocSet) unsettleLocked(id string, a *simAlloc) {
	if _, live := s.live[id]; !live {
		s.settled[statusSlot(a.status)]--
		s.live[id] = a
	}
}

// settleLocked takes a live allocation out of live if it is quiet. Most
// of those advance walks are not, so quiet is asked before the map: a
// profile of the full C1M's driver put 5% of its CPU in looking up every
// walked id in live.
func (s *allocSet) settleLocked(id string, a *simAlloc) {
	if !a.quiet() {
		return
	}
	if _, live := s.live[id]; live {
		delete(s.live, id)
		s.settled[statusSlot(a.status)]++
	}
}

// resetLiveLocked makes every allocation live and settles the quiet ones,
// after m was filled directly.
func (s *allocSet) resetLiveLocked() {
	clear(s.live)
	s.settled = [numClientStatuses]int{}
	for id, a := range s.m {
		s.live[id] = a
		s.settleLocked(id, a)
	}
	s.tallyLocked()
}

// statusSlot is st's position in allocSet.statuses.
func statusSlot(st droverv1.AllocClientStatus) int {
	if st < 0 || int(st) >= numClientStatuses {
		return 0
	}
	return int(st)
}

// resync marks every allocation that still runs here to be reported
// again, as after the node was away: the servers admit it back only after a
// report. Finished ones the servers acknowledged need no word.
func (s *allocSet) resync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, a := range s.m {
		if !a.status.IsClientTerminal() {
			s.unsettleLocked(id, a)
			a.reported = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED
		}
	}
}

// hasReports reports whether there are changes to send.
func (s *allocSet) hasReports() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasReportsLocked()
}

func (s *allocSet) hasReportsLocked() bool {
	for _, a := range s.live {
		if a.dirty() {
			return true
		}
	}
	return false
}

// count adds the number of allocations in each status to into.
func (s *allocSet) count(into map[droverv1.AllocClientStatus]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st, n := range s.statuses {
		if n > 0 {
			into[droverv1.AllocClientStatus(st)] += n
		}
	}
}
