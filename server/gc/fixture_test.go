package gc

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// now is the planning time of every test; ago turns an age into the unix
// nanoseconds the state records.
var now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func ago(d time.Duration) int64 { return now.Add(-d).UnixNano() }

const (
	old   = 48 * time.Hour // older than every default threshold
	fresh = time.Minute    // younger than every default threshold
	mid   = 2 * time.Hour  // older than Eval, younger than BatchEval and Job
)

// fixture is a state store written through its raft-entry methods, with a
// running index, so tests build state the way the FSM does.
type fixture struct {
	t     *testing.T
	s     *state.StateStore
	index uint64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, s: s}
}

func (f *fixture) next() uint64 {
	f.index++
	return f.index
}

func (f *fixture) check(what string, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

// node registers a node; it starts initializing, which takes reports.
func (f *fixture) node() *droverv1.Node {
	f.t.Helper()
	n := mock.Node()
	res, _, err := f.s.UpsertNodes(f.next(), &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n}, RegisteredAt: ago(old)})
	f.check("register node", err)
	f.check("register node", res.Errors[0])
	return n
}

func (f *fixture) nodeStatus(id string, status droverv1.NodeStatus, at int64) {
	f.t.Helper()
	_, err := f.s.UpdateNodeStatus(f.next(), &droverv1.NodeStatusEntry{NodeId: id, Status: status, UpdatedAt: at})
	f.check("node status "+id, err)
}

// job registers a job of one group of the given type, submitted at at.
// Its registration evaluation is pending until finishEvals.
func (f *fixture) job(typ droverv1.JobType, at int64) *droverv1.Job {
	f.t.Helper()
	j := mock.Job(1)
	j.Type = typ
	f.register(j, at)
	return f.s.Snapshot().JobByID(j.GetId())
}

func (f *fixture) register(j *droverv1.Job, at int64) {
	f.t.Helper()
	e := &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER), SubmittedAt: at}
	_, _, err := f.s.UpsertJob(f.next(), e)
	f.check("register job "+j.GetId(), err)
}

// newVersion registers a changed specification of the job.
func (f *fixture) newVersion(j *droverv1.Job, at int64) *droverv1.Job {
	f.t.Helper()
	c := f.s.Snapshot().JobByID(j.GetId()).CloneVT()
	c.Meta = map[string]string{"change": fmt.Sprint(f.index)}
	f.register(c, at)
	return f.s.Snapshot().JobByID(j.GetId())
}

func (f *fixture) stopJob(j *droverv1.Job, at int64) {
	f.t.Helper()
	e := &droverv1.JobDeregisterEntry{JobId: j.GetId(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER), DeregisteredAt: at}
	_, _, err := f.s.DeregisterJob(f.next(), e)
	f.check("stop job "+j.GetId(), err)
}

// finishEvals marks every evaluation of the job complete at at.
func (f *fixture) finishEvals(j *droverv1.Job, at int64) {
	f.t.Helper()
	var evals []*droverv1.Evaluation
	for ev := range f.s.Snapshot().EvalsByJob(j.GetId()) {
		c := ev.CloneVT()
		c.Status = droverv1.EvalStatus_EVAL_STATUS_COMPLETE
		c.ModifyTime = at
		evals = append(evals, c)
	}
	_, err := f.s.UpsertEvals(f.next(), &droverv1.EvalUpdateEntry{Evals: evals})
	f.check("finish evals of "+j.GetId(), err)
}

// eval writes an evaluation of the job in status, last changed at at.
func (f *fixture) eval(j *droverv1.Job, status droverv1.EvalStatus, at int64) *droverv1.Evaluation {
	f.t.Helper()
	ev := mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	ev.Status = status
	ev.ModifyTime = at
	_, err := f.s.UpsertEvals(f.next(), &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{ev.CloneVT()}})
	f.check("write eval", err)
	return ev
}

// alloc places an allocation of the job's current version on the node at
// at, made by ev (any evaluation id when ev is nil). edit, if given,
// changes it before placement.
func (f *fixture) alloc(n *droverv1.Node, j *droverv1.Job, ev *droverv1.Evaluation, at int64, edit ...func(*droverv1.Allocation)) *droverv1.Allocation {
	f.t.Helper()
	cur := f.s.Snapshot().JobByID(j.GetId())
	a := mock.Alloc(n, cur, int(f.index))
	if ev != nil {
		a.EvalId = ev.GetId()
	}
	for _, e := range edit {
		e(a)
	}
	_, err := f.s.UpsertPlanResults(f.next(), &droverv1.PlanResultEntry{Allocations: []*droverv1.Allocation{a.CloneVT()}, AppliedAt: at})
	f.check("place alloc", err)
	return a
}

// report applies an agent's report of the allocations' client status.
func (f *fixture) report(at int64, status droverv1.AllocClientStatus, allocs ...*droverv1.Allocation) {
	f.t.Helper()
	for _, a := range allocs {
		group := &droverv1.NodeAllocUpdates{NodeId: a.GetNodeId(), Allocs: []*droverv1.AllocClientUpdate{{AllocId: a.GetId(), ClientStatus: status}}}
		res, _, err := f.s.UpdateAllocsFromClient(f.next(), &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{group}, UpdatedAt: at})
		f.check("report alloc "+a.GetId(), err)
		if len(res.RefusedNodes) > 0 || len(res.UnknownAllocs) > 0 {
			f.t.Fatalf("report of %s refused: %+v", a.GetId(), res)
		}
	}
}

// stop sets the allocations' desired status stop at at, marking them lost
// when lost is set.
func (f *fixture) stop(at int64, lost bool, allocs ...*droverv1.Allocation) {
	f.t.Helper()
	e := &droverv1.PlanResultEntry{AppliedAt: at}
	for _, a := range allocs {
		s := &droverv1.AllocStop{AllocId: a.GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP}
		if lost {
			s.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
		}
		e.Stops = append(e.Stops, s)
	}
	_, err := f.s.UpsertPlanResults(f.next(), e)
	f.check("stop allocs", err)
}

// collected is a plan flattened into sorted id lists, for comparison.
type collected struct {
	Nodes, Allocs, Evals, Jobs, Versions []string
}

func flatten(entries []*droverv1.GCEntry) collected {
	var c collected
	for _, e := range entries {
		c.Nodes = append(c.Nodes, e.GetNodeIds()...)
		c.Allocs = append(c.Allocs, e.GetAllocIds()...)
		c.Evals = append(c.Evals, e.GetEvalIds()...)
		c.Jobs = append(c.Jobs, e.GetJobIds()...)
		for _, v := range e.GetJobVersions() {
			c.Versions = append(c.Versions, versionName(v.GetJobId(), v.GetVersion()))
		}
	}
	return c.sorted()
}

func (c collected) sorted() collected {
	for _, l := range []*[]string{&c.Nodes, &c.Allocs, &c.Evals, &c.Jobs, &c.Versions} {
		slices.Sort(*l)
		*l = slices.Clip(*l)
		if len(*l) == 0 {
			*l = nil
		}
	}
	return c
}

func versionName(jobID string, v uint64) string { return fmt.Sprintf("%s@%d", jobID, v) }

func idsOf[T interface{ GetId() string }](objs ...T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetId()
	}
	return out
}

// checkSafeOrder fails the test if applying entries one by one would
// delete an object before something collected that refers to it: an
// allocation after its evaluation, node, job or job version, an
// evaluation after its job. It also checks that no id appears twice and
// that no entry holds more than size ids.
func checkSafeOrder(t *testing.T, snap *state.Snapshot, entries []*droverv1.GCEntry, size int) {
	t.Helper()
	at := make(map[string]int) // "kind/id" -> entry position
	put := func(key string, i int) {
		if _, dup := at[key]; dup {
			t.Errorf("%s proposed twice", key)
		}
		at[key] = i
	}
	for i, e := range entries {
		n := len(e.GetNodeIds()) + len(e.GetAllocIds()) + len(e.GetEvalIds()) + len(e.GetJobIds()) + len(e.GetJobVersions())
		if n == 0 || n > size {
			t.Errorf("entry %d holds %d ids, want 1 to %d", i, n, size)
		}
		for _, id := range e.GetNodeIds() {
			put("node/"+id, i)
		}
		for _, id := range e.GetAllocIds() {
			put("alloc/"+id, i)
		}
		for _, id := range e.GetEvalIds() {
			put("eval/"+id, i)
		}
		for _, id := range e.GetJobIds() {
			put("job/"+id, i)
		}
		for _, v := range e.GetJobVersions() {
			put("version/"+versionName(v.GetJobId(), v.GetVersion()), i)
		}
	}
	// before checks that child is deleted no later than parent; with
	// mustGo, that parent is not deleted while child stays.
	before := func(child, parent string, mustGo bool) {
		p, okp := at[parent]
		if !okp {
			return
		}
		c, okc := at[child]
		if (okc && c > p) || (!okc && mustGo) {
			t.Errorf("%s (entry %d) deleted before %s (entry %d, collected %v)", parent, p, child, c, okc)
		}
	}
	for a := range snap.Allocs() {
		key := "alloc/" + a.GetId()
		before(key, "eval/"+a.GetEvalId(), true)
		before(key, "eval/"+a.GetFollowupEvalId(), true)
		before(key, "job/"+a.GetJobId(), true)
		before(key, "version/"+versionName(a.GetJobId(), a.GetJobVersion()), true)
		// A node may go before an allocation that is only server-terminal.
		before(key, "node/"+a.GetNodeId(), false)
	}
	for ev := range snap.Evals() {
		before("eval/"+ev.GetId(), "job/"+ev.GetJobId(), true)
	}
}
