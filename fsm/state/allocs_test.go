package state

import (
	"errors"
	"slices"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	running  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	complete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	lost     = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
	unknown  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
)

func TestPlacedAllocsAreFoundByNodeJobAndEval(t *testing.T) {
	f := newFixture(t)
	n1, n2 := f.node(), f.node()
	job := f.job(3)
	ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	if _, err := f.s.UpsertEvals(f.next(), &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{ev}}); err != nil {
		t.Fatal(err)
	}
	a1, a2, a3 := mock.Alloc(n1, job, 0), mock.Alloc(n1, job, 1), mock.Alloc(n2, job, 2)
	for _, a := range []*droverv1.Allocation{a1, a2, a3} {
		a.EvalId = ev.GetId()
	}
	placed := f.place(a1, a2, a3)
	index := f.index

	snap := f.s.Snapshot()
	onN1, n1Index := snap.AllocsByNode(n1.GetId())
	if want := sorted(a1.GetId(), a2.GetId()); !slices.Equal(ids(onN1), want) || n1Index != index {
		t.Errorf("allocs on n1 = %v at %d, want %v at %d", ids(onN1), n1Index, want, index)
	}
	ofJob, _ := snap.AllocsByJob(job.GetId())
	if want := sorted(a1.GetId(), a2.GetId(), a3.GetId()); !slices.Equal(ids(ofJob), want) {
		t.Errorf("allocs of job = %v, want %v", ids(ofJob), want)
	}
	if got := snap.AllocsByEval(ev.GetId()); len(got) != 3 {
		t.Errorf("allocs of eval = %d, want 3", len(got))
	}
	if got := snap.JobByID(job.GetId()).GetStatus(); got != droverv1.JobStatus_JOB_STATUS_RUNNING {
		t.Errorf("job status = %s, want running", got)
	}
	if got := snap.EvalByID(ev.GetId()); got.GetModifyIndex() != ev.GetModifyIndex() {
		t.Errorf("eval modify index moved without a plan naming it")
	}

	a := placed[0]
	if a.GetCreateIndex() != index || a.GetAllocModifyIndex() != index || a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING {
		t.Errorf("placed alloc: create %d alloc modify %d client %s", a.GetCreateIndex(), a.GetAllocModifyIndex(), a.GetClientStatus())
	}
	// The references share memory with the node, job and eval they name.
	if unsafe.StringData(a.GetNodeId()) != unsafe.StringData(n1.GetId()) {
		t.Errorf("node id of the allocation is not shared with the node")
	}
	if unsafe.StringData(a.GetEvalId()) != unsafe.StringData(snap.EvalByID(ev.GetId()).GetId()) {
		t.Errorf("eval id of the allocation is not shared with the eval")
	}
}

func TestPlanResultBumpsEvalModifyIndex(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(1)
	ev := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	if _, err := f.s.UpsertEvals(f.next(), &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{ev}}); err != nil {
		t.Fatal(err)
	}
	index := f.next()
	_, err := f.s.UpsertPlanResults(index, &droverv1.PlanResultEntry{
		Allocations: []*droverv1.Allocation{mock.Alloc(n, job, 0)}, EvalId: ev.GetId(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.s.Snapshot().EvalByID(ev.GetId()).GetModifyIndex(); got != index {
		t.Errorf("eval modify index = %d, want the plan's index %d", got, index)
	}
}

func TestPlanResultRejectsPlacementsWithoutReferences(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(1)
	good := mock.Alloc(n, job, 0)
	tests := []struct {
		name  string
		alloc func() *droverv1.Allocation
		want  error
	}{
		{"unknown node", func() *droverv1.Allocation { a := mock.Alloc(n, job, 1); a.NodeId = mock.ID(); return a }, ErrNotFound},
		{"unknown job", func() *droverv1.Allocation { a := mock.Alloc(n, job, 1); a.JobId = "nope"; return a }, ErrNotFound},
		{"unknown version", func() *droverv1.Allocation { a := mock.Alloc(n, job, 1); a.JobVersion = 9; return a }, ErrNotFound},
		{"unknown group", func() *droverv1.Allocation { a := mock.Alloc(n, job, 1); a.TaskGroup = "db"; return a }, ErrNotFound},
		{"malformed id", func() *droverv1.Allocation { a := mock.Alloc(n, job, 1); a.Id = "x"; return a }, ErrInvalidEntry},
		{"uppercase id", func() *droverv1.Allocation {
			a := mock.Alloc(n, job, 1)
			a.Id = "ABCDEF00-0000-4000-8000-000000000000"
			return a
		}, ErrInvalidEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.s.UpsertPlanResults(f.next(), &droverv1.PlanResultEntry{
				Allocations: []*droverv1.Allocation{good.CloneVT(), tt.alloc()},
			})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if f.s.Snapshot().AllocByID(good.GetId()) != nil {
				t.Errorf("a failed plan result placed part of itself")
			}
		})
	}
}

func TestStopsAndServerUpdates(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(2)
	placed := f.place(mock.Alloc(n, job, 0), mock.Alloc(n, job, 1))
	f.report(n.GetId(), running, placed[0].GetId(), placed[1].GetId())

	// An in-place update keeps the client's status; a stop with lost records it.
	update := placed[0].CloneVT()
	update.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	update.DesiredDescription = "updated in place"
	index := f.next()
	_, err := f.s.UpsertPlanResults(index, &droverv1.PlanResultEntry{
		Allocations: []*droverv1.Allocation{update},
		Stops: []*droverv1.AllocStop{{
			AllocId: placed[1].GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP,
			DesiredDescription: "node down", ClientStatus: lost,
		}},
		AppliedAt: 77,
	})
	if err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot()
	kept := snap.AllocByID(placed[0].GetId())
	if kept.GetClientStatus() != running || kept.GetAllocModifyIndex() != index || kept.GetCreateIndex() != placed[0].GetCreateIndex() {
		t.Errorf("updated alloc: client %s alloc modify %d create %d", kept.GetClientStatus(), kept.GetAllocModifyIndex(), kept.GetCreateIndex())
	}
	stopped := snap.AllocByID(placed[1].GetId())
	if !stopped.ServerTerminal() || stopped.GetClientStatus() != lost {
		t.Errorf("stopped alloc: desired %s client %s", stopped.GetDesiredStatus(), stopped.GetClientStatus())
	}
	if st := stopped.GetAllocStates(); len(st) != 1 || st[0].GetClientStatus() != lost || st[0].GetTime() != 77 {
		t.Errorf("alloc states = %v, want one lost entry at 77", st)
	}

	// Stopping an allocation that no longer exists is not an error; a stop
	// that asks for anything but stop or evict is.
	_, err = f.s.UpsertPlanResults(f.next(), &droverv1.PlanResultEntry{Stops: []*droverv1.AllocStop{{AllocId: mock.ID(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP}}})
	if err != nil {
		t.Errorf("stop of a missing allocation: %v", err)
	}
	_, err = f.s.UpsertPlanResults(f.next(), &droverv1.PlanResultEntry{Stops: []*droverv1.AllocStop{{AllocId: placed[0].GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN}}})
	if !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("stop with desired run: err = %v, want ErrInvalidEntry", err)
	}
}

func TestReplacementLinksPreviousAllocation(t *testing.T) {
	f := newFixture(t)
	n1, n2 := f.node(), f.node()
	job := f.job(1)
	orig := f.place(mock.Alloc(n1, job, 0))[0]
	_, n1Before := f.s.Snapshot().AllocsByNode(n1.GetId())
	repl := mock.Alloc(n2, job, 0)
	repl.PreviousAllocation = orig.GetId()
	f.place(repl)
	snap := f.s.Snapshot()
	if got := snap.AllocByID(orig.GetId()).GetNextAllocation(); got != repl.GetId() {
		t.Errorf("next allocation = %q, want %q", got, repl.GetId())
	}
	if _, n1After := snap.AllocsByNode(n1.GetId()); n1After != n1Before {
		t.Errorf("linking the replacement moved the original node's alloc index %d -> %d", n1Before, n1After)
	}
}

func TestClientUpdates(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(1)
	a := f.place(mock.Alloc(n, job, 0))[0]
	_, nodeIndex := f.s.Snapshot().AllocsByNode(n.GetId())

	res := f.report(n.GetId(), running, a.GetId(), mock.ID())
	index := f.index
	snap := f.s.Snapshot()
	got := snap.AllocByID(a.GetId())
	if got.GetClientStatus() != running || got.GetModifyIndex() != index || got.GetAllocModifyIndex() != a.GetAllocModifyIndex() {
		t.Errorf("reported alloc: client %s modify %d alloc modify %d", got.GetClientStatus(), got.GetModifyIndex(), got.GetAllocModifyIndex())
	}
	if len(res.UnknownAllocs) != 1 || len(res.RefusedNodes) != 0 {
		t.Errorf("result = %+v, want one unknown alloc", res)
	}
	if got := snap.NodeByID(n.GetId()); got.GetLastAllocUpdateIndex() != index || got.GetModifyIndex() != n.GetModifyIndex() {
		t.Errorf("node: last alloc update %d (want %d), modify %d (want unchanged %d)",
			got.GetLastAllocUpdateIndex(), index, got.GetModifyIndex(), n.GetModifyIndex())
	}
	if _, after := snap.AllocsByNode(n.GetId()); after != nodeIndex {
		t.Errorf("an agent's own report moved its GetAllocs index %d -> %d", nodeIndex, after)
	}
	if _, jobIndex := snap.AllocsByJob(job.GetId()); jobIndex != index {
		t.Errorf("job alloc index = %d, want %d", jobIndex, index)
	}
}

func TestClientUpdatesRefusedForUnresponsiveNode(t *testing.T) {
	for _, status := range []droverv1.NodeStatus{down, disconnected} {
		t.Run(status.String(), func(t *testing.T) {
			f := newFixture(t)
			n, other := f.node(), f.node()
			job := f.job(2)
			placed := f.place(mock.Alloc(n, job, 0), mock.Alloc(other, job, 1))
			f.setStatus(n.GetId(), ready)
			f.setStatus(n.GetId(), status)
			entry := &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{
				{NodeId: n.GetId(), Allocs: []*droverv1.AllocClientUpdate{{AllocId: placed[0].GetId(), ClientStatus: running}},
					Evals: []*droverv1.Evaluation{mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_RECONNECT)}},
				{NodeId: other.GetId(), Allocs: []*droverv1.AllocClientUpdate{{AllocId: placed[1].GetId(), ClientStatus: running}}},
			}}
			res, _, err := f.s.UpdateAllocsFromClient(f.next(), entry)
			if err != nil {
				t.Fatal(err)
			}
			if res.RefusedNodes[n.GetId()] != status || len(res.RefusedNodes) != 1 {
				t.Errorf("refused = %v, want only %s (%s)", res.RefusedNodes, n.GetId(), status)
			}
			snap := f.s.Snapshot()
			if snap.AllocByID(placed[0].GetId()).GetClientStatus() == running {
				t.Errorf("report of an unresponsive node was applied")
			}
			if snap.NodeByID(n.GetId()).GetLastAllocUpdateIndex() != 0 {
				t.Errorf("refused report set last alloc update index")
			}
			if snap.EvalByID(entry.Nodes[0].Evals[0].GetId()) != nil {
				t.Errorf("eval of a refused node was written")
			}
			if snap.AllocByID(placed[1].GetId()).GetClientStatus() != running {
				t.Errorf("the other node's report was not applied")
			}
		})
	}
}

func TestClientUpdatesWriteOneEvalPerJob(t *testing.T) {
	f := newFixture(t)
	n1, n2 := f.node(), f.node()
	job := f.job(2)
	placed := f.place(mock.Alloc(n1, job, 0), mock.Alloc(n2, job, 1))
	e1, e2 := mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE), mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE)
	failed := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
	_, _, err := f.s.UpdateAllocsFromClient(f.next(), &droverv1.AllocClientUpdateEntry{Nodes: []*droverv1.NodeAllocUpdates{
		{NodeId: n1.GetId(), Allocs: []*droverv1.AllocClientUpdate{{AllocId: placed[0].GetId(), ClientStatus: failed}}, Evals: []*droverv1.Evaluation{e1}},
		{NodeId: n2.GetId(), Allocs: []*droverv1.AllocClientUpdate{{AllocId: placed[1].GetId(), ClientStatus: failed}}, Evals: []*droverv1.Evaluation{e2}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot()
	if snap.EvalByID(e1.GetId()) == nil || snap.EvalByID(e2.GetId()) != nil {
		t.Errorf("want the first eval of the job only")
	}
}

func TestJobStatusFollowsAllocations(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	j := mock.Job(1)
	j.Type = droverv1.JobType_JOB_TYPE_BATCH
	f.register(j)
	a := f.place(mock.Alloc(n, f.s.Snapshot().JobByID(j.GetId()), 0))[0]
	if got := f.s.Snapshot().JobByID(j.GetId()).GetStatus(); got != droverv1.JobStatus_JOB_STATUS_RUNNING {
		t.Fatalf("status with a pending alloc = %s, want running", got)
	}
	f.report(n.GetId(), complete, a.GetId())
	got := f.s.Snapshot().JobByID(j.GetId())
	if got.GetStatus() != droverv1.JobStatus_JOB_STATUS_DEAD || got.GetVersion() != 0 {
		t.Errorf("finished batch job: status %s version %d, want dead at version 0", got.GetStatus(), got.GetVersion())
	}
}

func TestListAllocsPages(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	job := f.job(10)
	var want []string
	var allocs []*droverv1.Allocation
	for i := range 10 {
		a := mock.Alloc(n, job, i)
		allocs = append(allocs, a)
		want = append(want, a.GetId())
	}
	f.place(allocs...)
	slices.Sort(want)
	snap := f.s.Snapshot()

	var got []string
	p := Page{Size: 3}
	for {
		items, next := snap.ListAllocs(p)
		got = append(got, ids(items)...)
		if next == "" {
			break
		}
		p.After = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged ids = %v, want %v", got, want)
	}

	prefix := want[4][:3]
	var wantPrefixed []string
	for _, id := range want {
		if id[:3] == prefix {
			wantPrefixed = append(wantPrefixed, id)
		}
	}
	items, _ := snap.ListAllocs(Page{Prefix: prefix})
	if !slices.Equal(ids(items), wantPrefixed) {
		t.Errorf("prefix %q: %v, want %v", prefix, ids(items), wantPrefixed)
	}
	if items, _ := snap.ListAllocs(Page{Prefix: "XYZ"}); len(items) != 0 {
		t.Errorf("a prefix that cannot start a UUID matched %d allocations", len(items))
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// TestReportChanges checks ReportChanges against the apply itself: a
// report it calls unchanged must leave the allocation as stored but for its
// modify index and time, and one it calls a change must not.
func TestReportChanges(t *testing.T) {
	pending := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	report := func(status droverv1.AllocClientStatus, desc string, healthy *bool) *droverv1.AllocClientUpdate {
		return &droverv1.AllocClientUpdate{ClientStatus: status, ClientDescription: desc, Healthy: healthy, HealthTimestamp: 7}
	}
	yes, no := proto.Bool(true), proto.Bool(false)
	for _, tc := range []struct {
		name       string
		deployment bool
		before     *droverv1.AllocClientUpdate // reported first, if set
		report     *droverv1.AllocClientUpdate
		want       bool
	}{
		{"pending as placed", false, nil, report(pending, "", nil), false},
		{"running", false, nil, report(running, "", nil), true},
		{"pending, described", false, nil, report(pending, "pulling", nil), true},
		{"description again", false, report(pending, "pulling", nil), report(pending, "pulling", nil), false},
		{"description dropped", false, report(pending, "pulling", nil), report(pending, "", nil), true},
		{"health outside a deployment", false, report(running, "", nil), report(running, "", yes), false},
		{"first health", true, report(running, "", nil), report(running, "", yes), true},
		{"first health, unhealthy", true, report(running, "", nil), report(running, "", no), true},
		{"same health again", true, report(running, "", yes), report(running, "", yes), false},
		{"health turned", true, report(running, "", yes), report(running, "", no), true},
		{"no health said", true, report(running, "", yes), report(running, "", nil), false},
		{"complete, health kept", true, report(running, "", yes), report(complete, "", yes), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			job := f.job(1)
			a := mock.Alloc(n, job, 0)
			if tc.deployment {
				f.placeIn(deploymentOf(job, 1, 0), false, a)
			} else {
				f.place(a)
			}
			apply := func(u *droverv1.AllocClientUpdate) *droverv1.Allocation {
				u = u.CloneVT()
				u.AllocId = a.GetId()
				e := &droverv1.AllocClientUpdateEntry{UpdatedAt: 9, Nodes: []*droverv1.NodeAllocUpdates{{NodeId: n.GetId(), Allocs: []*droverv1.AllocClientUpdate{u}}}}
				if _, _, err := f.s.UpdateAllocsFromClient(f.next(), e); err != nil {
					t.Fatal(err)
				}
				return f.s.Snapshot().AllocByID(a.GetId())
			}
			stored := f.s.Snapshot().AllocByID(a.GetId())
			if tc.before != nil {
				stored = apply(tc.before)
			}
			u := tc.report.CloneVT()
			u.AllocId = a.GetId()
			got := ReportChanges(stored, u)
			after := apply(tc.report).CloneVT()
			after.ModifyIndex, after.ModifyTime = stored.GetModifyIndex(), stored.GetModifyTime()
			changed := !proto.Equal(stored, after)
			if got != tc.want || got != changed {
				t.Errorf("ReportChanges = %v, want %v; the apply changed the allocation: %v", got, tc.want, changed)
			}
		})
	}
}

// TestFirstReportsKeepWhetherTheNodeReported drives one node through
// reports, a missed heartbeat and its return, once with entries that
// record every report on the node's row and once with entries that record
// only the first since the node last missed a heartbeat. The one thing
// the row's last_alloc_update_index is read for, whether the node has
// reported since it missed a heartbeat, must read the same after every
// step; and the second kind must leave the row alone for later reports.
func TestFirstReportsKeepWhetherTheNodeReported(t *testing.T) {
	type step struct {
		name   string
		status droverv1.NodeStatus // a status change, or a report when unset
		// rewritten says whether a report of the second kind rewrites the
		// node's row.
		rewritten bool
	}
	steps := []step{
		{name: "first report", rewritten: true},
		{name: "second report"},
		{name: "ready", status: ready},
		{name: "report while ready"},
		{name: "down", status: down},
		{name: "report while down (refused)"},
		{name: "back, initializing", status: initializing},
		{name: "first report since", rewritten: true},
		{name: "report after that"},
		{name: "ready again", status: ready},
		{name: "report ready again"},
		{name: "disconnected", status: disconnected},
		{name: "initializing again", status: initializing},
		{name: "report after reconnecting", rewritten: true},
	}
	type run struct {
		f     *fixture
		node  *droverv1.Node
		alloc *droverv1.Allocation
		apply func(uint64, *droverv1.AllocClientUpdateEntry) (*ClientUpdateResult, []Change, error)
	}
	start := func(first bool) *run {
		f := newFixture(t)
		n := f.node()
		r := &run{f: f, node: n, alloc: f.place(mock.Alloc(n, f.job(1), 0))[0], apply: f.s.UpdateAllocsFromClient}
		if first {
			r.apply = f.s.UpdateAllocsFromClientFirstReports
		}
		return r
	}
	every, first := start(false), start(true)
	reported := func(r *run) bool {
		n := r.f.s.Snapshot().NodeByID(r.node.GetId())
		return n.GetLastAllocUpdateIndex() > n.GetLastMissedHeartbeatIndex()
	}
	for i, st := range steps {
		for _, r := range []*run{every, first} {
			if st.status != droverv1.NodeStatus_NODE_STATUS_UNSPECIFIED {
				r.f.setStatus(r.node.GetId(), st.status)
				continue
			}
			status := running
			if i%2 == 0 {
				status = pending
			}
			e := &droverv1.AllocClientUpdateEntry{UpdatedAt: 5, Nodes: []*droverv1.NodeAllocUpdates{{NodeId: r.node.GetId(),
				Allocs: []*droverv1.AllocClientUpdate{{AllocId: r.alloc.GetId(), ClientStatus: status}}}}}
			before := r.f.s.Snapshot().NodeByID(r.node.GetId())
			if _, _, err := r.apply(r.f.next(), e); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			after := r.f.s.Snapshot().NodeByID(r.node.GetId())
			if r == first && (after != before) != st.rewritten {
				t.Errorf("%s: node row rewritten %v, want %v", st.name, after != before, st.rewritten)
			}
		}
		if reported(every) != reported(first) {
			t.Errorf("%s: reported since the missed heartbeat: %v recording every report, %v recording the first", st.name, reported(every), reported(first))
		}
	}
}
