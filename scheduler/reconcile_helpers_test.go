package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Builders and result summaries for the reconciler tests. Everything is
// prefixed rc so as not to clash with other test helpers of the package.

// rcNow is the fixed "now" of every reconciler test.
const rcNow = int64(1_700_000_000) * int64(time.Second)

const (
	rcEval  = "eval-1"
	rcGroup = "web"
)

const (
	csPending  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	csRunning  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	csComplete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	csFailed   = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
	csLost     = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
	csUnknown  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN

	dsRun  = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
	dsStop = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP

	nsInit         = droverv1.NodeStatus_NODE_STATUS_INITIALIZING
	nsReady        = droverv1.NodeStatus_NODE_STATUS_READY
	nsDown         = droverv1.NodeStatus_NODE_STATUS_DOWN
	nsDisconnected = droverv1.NodeStatus_NODE_STATUS_DISCONNECTED

	jtService = droverv1.JobType_JOB_TYPE_SERVICE
	jtBatch   = droverv1.JobType_JOB_TYPE_BATCH
	jtSystem  = droverv1.JobType_JOB_TYPE_SYSTEM
)

// rcJob builds a canonical job "j" of one group "web" at version 1.
func rcJob(typ droverv1.JobType, count int32, opts ...func(*droverv1.Job)) *droverv1.Job {
	j := &droverv1.Job{
		Id:          "j",
		Type:        typ,
		Priority:    60,
		Datacenters: []string{"dc1"},
		Version:     1,
		TaskGroups: []*droverv1.TaskGroup{{
			Name:      rcGroup,
			Count:     count,
			Resources: &droverv1.Resources{CpuMhz: 100, MemoryMb: 128},
			Tasks: []*droverv1.Task{{
				Name: "t", Driver: "exec", Config: map[string]string{"command": "/bin/app"},
			}},
		}},
	}
	j.Canonicalize()
	for _, o := range opts {
		o(j)
	}
	return j
}

// rcNextVersion returns a copy of job at the next version, changed by opts.
func rcNextVersion(job *droverv1.Job, opts ...func(*droverv1.Job)) *droverv1.Job {
	j := job.CloneVT()
	j.Version++
	for _, o := range opts {
		o(j)
	}
	return j
}

func rcTG(j *droverv1.Job) *droverv1.TaskGroup { return j.GetTaskGroups()[0] }

func withPolicy(p *droverv1.ReschedulePolicy) func(*droverv1.Job) {
	return func(j *droverv1.Job) { rcTG(j).ReschedulePolicy = p }
}

func withDisconnect(d time.Duration, s droverv1.ReconnectStrategy) func(*droverv1.Job) {
	return func(j *droverv1.Job) {
		rcTG(j).MaxClientDisconnect = durationpb.New(d)
		rcTG(j).ReconnectStrategy = s
	}
}

func withCount(n int32) func(*droverv1.Job) {
	return func(j *droverv1.Job) { rcTG(j).Count = n }
}

// rcVersions serves job versions to the reconciler.
func rcVersions(jobs ...*droverv1.Job) func(uint64) *droverv1.Job {
	return func(v uint64) *droverv1.Job {
		for _, j := range jobs {
			if j.GetVersion() == v {
				return j
			}
		}
		return nil
	}
}

// rcNode builds a node in dc1.
func rcNode(id string, status droverv1.NodeStatus, opts ...func(*droverv1.Node)) *droverv1.Node {
	n := &droverv1.Node{
		Id: id, Name: id, Datacenter: "dc1", Status: status,
		SchedulingEligibility: droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE,
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// draining starts a drain of the node; which of its allocations move is
// the drainer's decision, marked on each allocation (withMigrate).
func draining() func(*droverv1.Node) {
	return func(n *droverv1.Node) {
		n.DrainStrategy = &droverv1.DrainStrategy{StartedAt: rcNow}
		n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
	}
}

func rcNodes(nodes ...*droverv1.Node) map[string]*droverv1.Node {
	m := make(map[string]*droverv1.Node, len(nodes))
	for _, n := range nodes {
		m[n.GetId()] = n
	}
	return m
}

// rcAlloc builds a running allocation of job's group at name index idx on
// node, with id "a<idx>".
func rcAlloc(job *droverv1.Job, idx int, node string, opts ...func(*droverv1.Allocation)) *droverv1.Allocation {
	a := &droverv1.Allocation{
		Id:            fmt.Sprintf("a%d", idx),
		EvalId:        "eval-0",
		Name:          allocName(job.GetId(), rcGroup, idx),
		NodeId:        node,
		JobId:         job.GetId(),
		JobVersion:    job.GetVersion(),
		TaskGroup:     rcGroup,
		DesiredStatus: dsRun,
		ClientStatus:  csRunning,
		CreateTime:    rcNow - int64(time.Hour),
		ModifyTime:    rcNow - int64(time.Hour),
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

func withID(id string) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.Id = id }
}

func withClient(s droverv1.AllocClientStatus) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.ClientStatus = s }
}

func withDesired(s droverv1.AllocDesiredStatus) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.DesiredStatus = s }
}

func withGroup(g string) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) {
		a.TaskGroup = g
		a.Name = "j." + g + "[0]"
	}
}

func withPrev(id string) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.PreviousAllocation = id }
}

func withNext(id string) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.NextAllocation = id }
}

func withModified(t int64) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.ModifyTime = t }
}

func withCreated(t int64) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.CreateTime = t }
}

func withScore(s float64) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.Score = s }
}

func withFollowup(id string) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.FollowupEvalId = id }
}

func withMigrate() func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.DesiredTransition = &droverv1.DesiredTransition{Migrate: true} }
}

// withReschedules gives the allocation a tracker with one event at each
// time.
func withReschedules(times ...int64) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) {
		tr := &droverv1.RescheduleTracker{}
		for i, t := range times {
			tr.Events = append(tr.Events, &droverv1.RescheduleEvent{Time: t, PrevAllocId: fmt.Sprintf("old%d", i)})
		}
		a.RescheduleTracker = tr
	}
}

// withStates appends client-status AllocState entries.
func withStates(entries ...*droverv1.AllocState) func(*droverv1.Allocation) {
	return func(a *droverv1.Allocation) { a.AllocStates = append(a.AllocStates, entries...) }
}

func stateAt(s droverv1.AllocClientStatus, t int64) *droverv1.AllocState {
	return &droverv1.AllocState{Field: droverv1.AllocStateField_ALLOC_STATE_FIELD_CLIENT_STATUS, ClientStatus: s, Time: t}
}

// rcRun runs the generic reconciler on job (jobVersion also knows older
// versions given) at rcNow for evaluation rcEval.
func rcRun(t *testing.T, job *droverv1.Job, older []*droverv1.Job, allocs []*droverv1.Allocation,
	nodes map[string]*droverv1.Node, mods ...func(*reconcileInput)) *reconcileResult {
	t.Helper()
	in := reconcileInput{
		job:             job,
		jobVersion:      rcVersions(append(slices.Clone(older), job)...),
		allocs:          allocs,
		nodes:           nodes,
		evalID:          rcEval,
		evalTriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER,
		now:             rcNow,
	}
	for _, m := range mods {
		m(&in)
	}
	res := reconcile(in)
	rcCheckCounts(t, allocs, res)
	return res
}

// rcEvalStatus makes every evaluation the reconciler looks up have status s.
func rcEvalStatus(s droverv1.EvalStatus) func(*reconcileInput) {
	return func(in *reconcileInput) {
		in.evalByID = func(id string) *droverv1.Evaluation {
			return &droverv1.Evaluation{Id: id, Status: s}
		}
	}
}

// rcCheckCounts checks that every allocation the servers want running, or
// the reconciler acted on, is counted exactly once in its group's desired
// counts, and that the counts match the result.
func rcCheckCounts(t *testing.T, allocs []*droverv1.Allocation, res *reconcileResult) {
	t.Helper()
	acted := make(map[string]bool)
	for _, st := range res.stop {
		acted[st.alloc.GetId()] = true
	}
	for _, d := range res.destructive {
		acted[d.stop.alloc.GetId()] = true
	}
	for _, a := range res.inplace {
		acted[a.GetId()] = true
	}
	perGroup := make(map[string]int)
	for _, a := range allocs {
		if !a.ServerTerminal() || acted[a.GetId()] {
			perGroup[a.GetTaskGroup()]++
		}
	}
	var stops, places, destructive, inplace int
	for g, d := range res.desired {
		if got := d.stop + d.inplace + d.destructive + d.ignore + d.reconnect + d.migrate; got != perGroup[g] {
			t.Errorf("group %s: desired counts %+v cover %d allocations, want %d", g, *d, got, perGroup[g])
		}
		// A migration stops the allocation and places its replacement.
		stops += d.stop + d.migrate
		places += d.place + d.migrate + d.canary
		destructive += d.destructive
		inplace += d.inplace
	}
	if stops != len(res.stop) || places != len(res.place) || destructive != len(res.destructive) || inplace != len(res.inplace) {
		t.Errorf("desired counts (stop %d, place %d, destructive %d, inplace %d) disagree with result (%d, %d, %d, %d)",
			stops, places, destructive, inplace, len(res.stop), len(res.place), len(res.destructive), len(res.inplace))
	}
	seen := make(map[string]bool)
	for _, s := range res.stop {
		if seen[s.alloc.GetId()] {
			t.Errorf("allocation %s stopped twice", s.alloc.GetId())
		}
		seen[s.alloc.GetId()] = true
	}
	for _, a := range slices.Concat(res.inplace, res.attributeUpdates) {
		if seen[a.GetId()] {
			t.Errorf("allocation %s both stopped and updated, or updated twice", a.GetId())
		}
		seen[a.GetId()] = true
	}
}

// rcSummary is a result in short strings, each list sorted:
//
//	place:       "name", "name<-prev", with " resched" / " lost" / " @node"
//	stop:        "id: description", with " (lost)" when marked lost
//	inplace:     "id@version"
//	destructive: "id => name@node"
//	attr:        "id" plus " unknown" / " reconnected" / " followup"
type rcSummary struct {
	place, stop, inplace, destructive, attr []string
	evals                                   int
}

func summarize(res *reconcileResult) rcSummary {
	var s rcSummary
	for _, p := range res.place {
		s.place = append(s.place, placementString(p))
	}
	for _, st := range res.stop {
		s.stop = append(s.stop, stopString(st))
	}
	for _, a := range res.inplace {
		s.inplace = append(s.inplace, fmt.Sprintf("%s@%d", a.GetId(), a.GetJobVersion()))
	}
	for _, d := range res.destructive {
		s.destructive = append(s.destructive, d.stop.alloc.GetId()+" => "+placementString(d.place))
		if d.stop.description != allocUpdating {
			s.destructive = append(s.destructive, "bad description "+d.stop.description)
		}
	}
	for _, a := range res.attributeUpdates {
		s.attr = append(s.attr, attrString(a))
	}
	s.evals = len(res.followupEvals)
	for _, l := range [][]string{s.place, s.stop, s.inplace, s.destructive, s.attr} {
		slices.Sort(l)
	}
	return s
}

func placementString(p placement) string {
	s := p.name
	if p.previous != nil {
		s += "<-" + p.previous.GetId()
	}
	if p.reschedule {
		s += " resched"
	}
	if p.lost {
		s += " lost"
	}
	if p.node != "" {
		s += " @" + p.node
	}
	return s
}

func stopString(st allocStop) string {
	s := st.alloc.GetId() + ": " + st.description
	if st.clientStatus == csLost {
		s += " (lost)"
	}
	return s
}

func attrString(a *droverv1.Allocation) string {
	s := a.GetId()
	st := a.GetAllocStates()
	switch {
	case a.GetClientStatus() == csUnknown && a.GetClientDescription() == droverv1.ClientDescriptionUnknown && needsReconnect(a):
		s += " unknown"
	case len(st) >= 2 && !needsReconnect(a) && st[len(st)-2].GetClientStatus() == csUnknown:
		s += " reconnected"
	}
	if a.GetFollowupEvalId() != "" {
		s += " followup"
	}
	return s
}

// rcCompare reports the differing fields of two summaries.
func rcCompare(t *testing.T, got, want rcSummary) {
	t.Helper()
	check := func(field string, g, w []string) {
		if !slices.Equal(g, w) {
			t.Errorf("%s:\n got  %q\n want %q", field, g, w)
		}
	}
	check("place", got.place, want.place)
	check("stop", got.stop, want.stop)
	check("inplace", got.inplace, want.inplace)
	check("destructive", got.destructive, want.destructive)
	check("attributeUpdates", got.attr, want.attr)
	if got.evals != want.evals {
		t.Errorf("follow-up evals: got %d, want %d", got.evals, want.evals)
	}
}
