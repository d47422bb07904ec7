package rpc_test

import (
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

func TestUpdateAllocRejections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n, other := e.register(), e.register()
	job := e.job(2)
	mine := e.place(n, job, 1)[0]
	theirs := e.place(other, job, 1)[0]
	tests := []struct {
		name  string
		req   *droverv1.UpdateAllocRequest
		code  codes.Code
		field string
	}{
		{"unknown node", &droverv1.UpdateAllocRequest{NodeId: mock.ID(), SecretId: mock.ID(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: mine.GetId(), ClientStatus: running}}}, codes.NotFound, ""},
		{"wrong secret", &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: other.GetSecretId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: mine.GetId(), ClientStatus: running}}}, codes.PermissionDenied, ""},
		{"another node's allocation", &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: theirs.GetId(), ClientStatus: running}}}, codes.PermissionDenied, ""},
		{"no allocations", &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId()}, codes.InvalidArgument, "allocs"},
		{"agent reports lost", &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: mine.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST}}}, codes.InvalidArgument, "allocs[0].client_status"},
		{"no status", &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: mine.GetId()}}}, codes.InvalidArgument, "allocs[0].client_status"},
		{"reported twice", &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: mine.GetId(), ClientStatus: running}, {AllocId: mine.GetId(), ClientStatus: running}}}, codes.InvalidArgument, "allocs[1].alloc_id"},
		{"health without a time", &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: mine.GetId(), ClientStatus: running, Healthy: proto.Bool(true)}}}, codes.InvalidArgument, "allocs[0].health_timestamp"},
		{"bad alloc id", &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: "a1", ClientStatus: running}}}, codes.InvalidArgument, "allocs[0].alloc_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.latestIndex()
			_, err := e.nodes.UpdateAlloc(e.ctx(), tt.req)
			if tt.field != "" {
				wantInvalid(t, err, tt.field)
			} else {
				wantCode(t, err, tt.code)
			}
			if e.latestIndex() != before {
				t.Errorf("a refused report wrote to raft")
			}
		})
	}
	for _, status := range []droverv1.NodeStatus{down, disconnected} {
		t.Run("node "+status.String(), func(t *testing.T) {
			e.setStatus(n, status)
			before := e.latestIndex()
			_, err := e.report(n, running, mine.GetId())
			wantCode(t, err, codes.FailedPrecondition)
			if e.latestIndex() != before {
				t.Errorf("a refused report wrote to raft")
			}
		})
	}
}

func TestUpdateAllocRecordsReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	e.heartbeat(n)
	job := e.job(2)
	allocs := e.place(n, job, 2)
	gone := mock.ID()
	resp, err := e.report(n, running, allocs[0].GetId(), gone)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.GetUnknownAllocIds(), []string{gone}) {
		t.Errorf("unknown allocs = %v, want [%s]", resp.GetUnknownAllocIds(), gone)
	}
	snap := e.srv.State().Snapshot()
	got := snap.AllocByID(allocs[0].GetId())
	if got.GetClientStatus() != running || got.GetModifyIndex() != resp.GetIndex() || got.GetAllocModifyIndex() != allocs[0].GetAllocModifyIndex() {
		t.Errorf("reported alloc: %s, modify %d (want %d), alloc modify %d (want %d)", got.GetClientStatus(),
			got.GetModifyIndex(), resp.GetIndex(), got.GetAllocModifyIndex(), allocs[0].GetAllocModifyIndex())
	}
	if snap.NodeByID(n.GetId()).GetLastAllocUpdateIndex() != resp.GetIndex() {
		t.Errorf("node's last alloc update index was not recorded")
	}

	// A failure calls for rescheduling: one evaluation for the job.
	resp, err = e.report(n, failed, allocs[0].GetId(), allocs[1].GetId())
	if err != nil {
		t.Fatal(err)
	}
	var evals []*droverv1.Evaluation
	for ev := range e.srv.State().Snapshot().EvalsByJob(job.GetId()) {
		if ev.GetCreateIndex() == resp.GetIndex() {
			evals = append(evals, ev)
		}
	}
	if len(evals) != 1 || evals[0].GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_FAILURE {
		t.Errorf("evals written with the failure report: %v, want one alloc-failure eval", evals)
	}
}

// TestUpdateAllocLeavesOutUnchangedReports checks that a report of what the
// servers already hold (an allocation pending as placed) is not written,
// while the node's report is recorded and the call acknowledged.
func TestUpdateAllocLeavesOutUnchangedReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	e.heartbeat(n)
	allocs := e.place(n, e.job(2), 2)
	resp, err := e.report(n, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING, allocs[0].GetId(), allocs[1].GetId())
	if err != nil {
		t.Fatal(err)
	}
	snap := e.srv.State().Snapshot()
	for _, a := range allocs {
		if got := snap.AllocByID(a.GetId()); got.GetModifyIndex() != a.GetModifyIndex() {
			t.Errorf("alloc %s: modify index %d after an unchanged report, want %d as placed", a.GetId(), got.GetModifyIndex(), a.GetModifyIndex())
		}
	}
	if got := snap.NodeByID(n.GetId()).GetLastAllocUpdateIndex(); got != resp.GetIndex() || got == 0 {
		t.Errorf("node's last alloc update index %d, want the report's %d", got, resp.GetIndex())
	}
}

// TestUpdateAllocBatchesReports checks that reports arriving together from
// many agents share one raft entry. The window is longer than the default
// 50ms so that a busy machine cannot spread the calls over many windows.
func TestUpdateAllocBatchesReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.UpdateAllocBatchInterval = time.Second })
	job := e.job(1)
	const agents = 20
	type agent struct {
		node  *droverv1.Node
		alloc *droverv1.Allocation
	}
	var as []agent
	for range agents {
		n := e.register()
		as = append(as, agent{n, e.place(n, job, 1)[0]})
	}
	before := e.latestIndex()
	indexes := make([]uint64, agents)
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Go(func() {
			resp, err := e.report(a.node, running, a.alloc.GetId())
			if err != nil {
				t.Error(err)
				return
			}
			indexes[i] = resp.GetIndex()
		})
	}
	wg.Wait()
	entries := e.latestIndex() - before
	// The calls may straddle two windows, never more.
	if entries > 2 {
		t.Errorf("%d reports took %d raft entries, want them batched into one or two", agents, entries)
	}
	for i, idx := range indexes {
		if idx <= before || idx > e.latestIndex() {
			t.Errorf("report %d acknowledged at index %d, outside (%d, %d]", i, idx, before, e.latestIndex())
		}
	}
}

func TestGetAllocsRejections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	tests := []struct {
		name  string
		req   *droverv1.GetAllocsRequest
		code  codes.Code
		field string
	}{
		{"unknown node", &droverv1.GetAllocsRequest{NodeId: mock.ID(), SecretId: mock.ID()}, codes.NotFound, ""},
		{"wrong secret", &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: mock.ID()}, codes.PermissionDenied, ""},
		{"bad node id", &droverv1.GetAllocsRequest{NodeId: "n", SecretId: n.GetSecretId()}, codes.InvalidArgument, "node_id"},
		{"no secret", &droverv1.GetAllocsRequest{NodeId: n.GetId()}, codes.InvalidArgument, "secret_id"},
		{"bad known job id", &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			KnownJobs: []*droverv1.KnownJobVersion{{JobId: "web"}, {JobId: "no spaces"}}}, codes.InvalidArgument, "known_jobs[1].job_id"},
		{"too many known jobs", &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			KnownJobs: make([]*droverv1.KnownJobVersion, droverv1.MaxKnownJobs+1)}, codes.InvalidArgument, "known_jobs"},
		{"bad known alloc id", &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			KnownAllocs: []*droverv1.KnownAlloc{{AllocId: mock.ID()}, {AllocId: "a1"}}}, codes.InvalidArgument, "known_allocs[1].alloc_id"},
		{"too many known allocs", &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(),
			KnownAllocs: make([]*droverv1.KnownAlloc, droverv1.MaxKnownAllocs+1)}, codes.InvalidArgument, "known_allocs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.nodes.GetAllocs(e.ctx(), tt.req)
			if tt.field != "" {
				wantInvalid(t, err, tt.field)
			} else {
				wantCode(t, err, tt.code)
			}
		})
	}
}

func TestGetAllocsReturnsAllocsAndJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	job := e.job(3)
	placed := e.place(n, job, 3)
	resp, err := e.nodes.GetAllocs(e.ctx(), &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetAllocs()) != 3 || resp.GetIndex() != placed[0].GetAllocModifyIndex() {
		t.Errorf("%d allocs at index %d, want 3 at %d", len(resp.GetAllocs()), resp.GetIndex(), placed[0].GetAllocModifyIndex())
	}
	if len(resp.GetJobs()) != 1 || resp.GetJobs()[0].GetId() != job.GetId() || resp.GetJobs()[0].GetVersion() != job.GetVersion() {
		t.Errorf("jobs = %v, want the one job version the allocations run", resp.GetJobs())
	}
}

// TestGetAllocsLeavesOutKnownJobs checks that an answer leaves out the job
// versions the agent says it holds, and only those: a version named with
// another job_modify_index (the job purged and registered again under the
// same number) is sent.
func TestGetAllocsLeavesOutKnownJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	web, db := e.job(2), e.job(2)
	e.place(n, web, 2)
	e.place(n, db, 1)
	ask := func(known ...*droverv1.KnownJobVersion) map[string]*droverv1.Job {
		t.Helper()
		resp, err := e.nodes.GetAllocs(e.ctx(), &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), KnownJobs: known})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetAllocs()) != 3 {
			t.Fatalf("%d allocations, want all 3 whatever the agent knows", len(resp.GetAllocs()))
		}
		jobs := make(map[string]*droverv1.Job)
		for _, j := range resp.GetJobs() {
			jobs[j.GetId()] = j
		}
		return jobs
	}
	all := ask()
	if len(all) != 2 || all[web.GetId()] == nil || all[db.GetId()] == nil {
		t.Fatalf("jobs %v, want both versions with nothing known", slices.Collect(maps.Keys(all)))
	}
	held := func(j *droverv1.Job, modifyIndex uint64) *droverv1.KnownJobVersion {
		return &droverv1.KnownJobVersion{JobId: j.GetId(), Version: j.GetVersion(), JobModifyIndex: modifyIndex}
	}
	w := all[web.GetId()]
	tests := []struct {
		name  string
		known []*droverv1.KnownJobVersion
		want  []string
	}{
		{"one known", []*droverv1.KnownJobVersion{held(w, w.GetJobModifyIndex())}, []string{db.GetId()}},
		{"both known", []*droverv1.KnownJobVersion{held(w, w.GetJobModifyIndex()), held(all[db.GetId()], all[db.GetId()].GetJobModifyIndex())}, nil},
		{"known under another modify index", []*droverv1.KnownJobVersion{held(w, w.GetJobModifyIndex()+1)}, []string{db.GetId(), web.GetId()}},
		{"another version known", []*droverv1.KnownJobVersion{{JobId: w.GetId(), Version: w.GetVersion() + 1, JobModifyIndex: w.GetJobModifyIndex()}}, []string{db.GetId(), web.GetId()}},
		{"a job not running here known", []*droverv1.KnownJobVersion{{JobId: "elsewhere", Version: 0, JobModifyIndex: 7}}, []string{db.GetId(), web.GetId()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(ask(tt.known...)))
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("jobs sent %v, want %v", got, want)
			}
		})
	}
}

// TestGetAllocsLeavesOutKnownAllocs checks that an answer names the
// allocations the agent holds at their current modify_index as unchanged
// instead of sending them, sends those it holds at another index, and the
// job versions of only what it sends.
func TestGetAllocsLeavesOutKnownAllocs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	web, db := e.job(2), e.job(1)
	e.place(n, web, 2)
	e.place(n, db, 1)
	ask := func(known ...*droverv1.KnownAlloc) *droverv1.GetAllocsResponse {
		t.Helper()
		resp, err := e.nodes.GetAllocs(e.ctx(), &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), KnownAllocs: known})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	all := ask().GetAllocs()
	if len(all) != 3 {
		t.Fatalf("%d allocations, want 3 with nothing known", len(all))
	}
	byJob := map[string][]*droverv1.Allocation{}
	for _, a := range all {
		byJob[a.GetJobId()] = append(byJob[a.GetJobId()], a)
	}
	w0, w1, d := byJob[web.GetId()][0], byJob[web.GetId()][1], byJob[db.GetId()][0]
	held := func(a *droverv1.Allocation, modifyIndex uint64) *droverv1.KnownAlloc {
		return &droverv1.KnownAlloc{AllocId: a.GetId(), ModifyIndex: modifyIndex}
	}
	// Agents name what they hold in id order; the server takes any order.
	descending := func(known ...*droverv1.KnownAlloc) []*droverv1.KnownAlloc {
		slices.SortFunc(known, func(a, b *droverv1.KnownAlloc) int { return strings.Compare(b.GetAllocId(), a.GetAllocId()) })
		return known
	}
	tests := []struct {
		name                  string
		known                 []*droverv1.KnownAlloc
		sent, unchanged, jobs []string
	}{
		{"one held", []*droverv1.KnownAlloc{held(w0, w0.GetModifyIndex())},
			[]string{w1.GetId(), d.GetId()}, []string{w0.GetId()}, []string{web.GetId(), db.GetId()}},
		{"a job's all held", []*droverv1.KnownAlloc{held(w0, w0.GetModifyIndex()), held(w1, w1.GetModifyIndex())},
			[]string{d.GetId()}, []string{w0.GetId(), w1.GetId()}, []string{db.GetId()}},
		{"all held", []*droverv1.KnownAlloc{held(w0, w0.GetModifyIndex()), held(w1, w1.GetModifyIndex()), held(d, d.GetModifyIndex())},
			nil, []string{w0.GetId(), w1.GetId(), d.GetId()}, nil},
		{"all held, named out of id order", descending(held(w0, w0.GetModifyIndex()), held(w1, w1.GetModifyIndex()), held(d, d.GetModifyIndex())),
			nil, []string{w0.GetId(), w1.GetId(), d.GetId()}, nil},
		{"held at an older index", []*droverv1.KnownAlloc{held(d, d.GetModifyIndex()-1)},
			[]string{w0.GetId(), w1.GetId(), d.GetId()}, nil, []string{web.GetId(), db.GetId()}},
		{"held but collected", []*droverv1.KnownAlloc{{AllocId: mock.ID(), ModifyIndex: 3}},
			[]string{w0.GetId(), w1.GetId(), d.GetId()}, nil, []string{web.GetId(), db.GetId()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ask(tt.known...)
			var sent, jobs []string
			for _, a := range resp.GetAllocs() {
				sent = append(sent, a.GetId())
			}
			for _, j := range resp.GetJobs() {
				jobs = append(jobs, j.GetId())
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"sent", sent, tt.sent}, {"unchanged", resp.GetUnchangedAllocIds(), tt.unchanged}, {"job versions", jobs, tt.jobs}} {
				if got, want := slices.Sorted(slices.Values(c.got)), slices.Sorted(slices.Values(c.want)); !slices.Equal(got, want) {
					t.Errorf("%s %v, want %v", c.what, got, want)
				}
			}
		})
	}
}

// TestGetAllocsBlocks checks the long poll: it waits out max_wait when
// nothing of its node changes, ignores changes elsewhere and the agent's own
// reports, and returns as soon as the servers change its allocations.
func TestGetAllocsBlocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n, other := e.register(), e.register()
	job := e.job(4)
	mine := e.place(n, job, 1)[0]
	start := mine.GetAllocModifyIndex()

	t.Run("times out unchanged", func(t *testing.T) {
		began := time.Now()
		resp, err := e.nodes.GetAllocs(e.ctx(), &droverv1.GetAllocsRequest{
			NodeId: n.GetId(), SecretId: n.GetSecretId(), MinIndex: start, MaxWait: durationpb.New(300 * time.Millisecond),
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetIndex() != start {
			t.Errorf("index %d, want unchanged %d", resp.GetIndex(), start)
		}
		if waited := time.Since(began); waited < 300*time.Millisecond {
			t.Errorf("returned after %s, before max_wait", waited)
		}
	})

	t.Run("wakes for its own node only", func(t *testing.T) {
		done := make(chan *droverv1.GetAllocsResponse, 1)
		go func() {
			resp, err := e.nodes.GetAllocs(e.ctx(), &droverv1.GetAllocsRequest{
				NodeId: n.GetId(), SecretId: n.GetSecretId(), MinIndex: start, MaxWait: durationpb.New(time.Minute),
			})
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		waitBlocked(t, e, 1)
		e.place(other, job, 1)
		if _, err := e.report(n, running, mine.GetId()); err != nil {
			t.Fatal(err)
		}
		if got := e.srv.BlockedQueries(); got != 1 {
			t.Fatalf("blocked queries = %d after unrelated writes, want 1", got)
		}
		again := e.place(n, job, 1)[0]
		resp := <-done
		if resp.GetIndex() != again.GetAllocModifyIndex() || len(resp.GetAllocs()) != 2 {
			t.Errorf("woke with %d allocs at %d, want 2 at %d", len(resp.GetAllocs()), resp.GetIndex(), again.GetAllocModifyIndex())
		}
	})
}

// waitBlocked waits until n blocking queries are parked on the server.
func waitBlocked(t testing.TB, e *env, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for e.srv.BlockedQueries() != n {
		if time.Now().After(deadline) {
			t.Fatalf("blocked queries = %d, want %d: %v", e.srv.BlockedQueries(), n, errTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestUpdateAllocRecordsTheFirstReportOnce reports twice from a ready
// node. A cluster whose servers all know AllocClientReport entries records
// the node's first report only, leaving its row alone for the second; a
// cluster with a server of an older release writes AllocClientUpdate
// entries, which record both.
func TestUpdateAllocRecordsTheFirstReportOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version    string
		secondMove bool
	}{
		{"", false},
		{"0.2.0", true},
	} {
		t.Run("version="+tc.version, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *server.Config) { c.Version = tc.version })
			n := e.register()
			e.heartbeat(n)
			allocs := e.place(n, e.job(1), 1)
			first, err := e.report(n, running, allocs[0].GetId())
			if err != nil {
				t.Fatal(err)
			}
			second, err := e.report(n, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[0].GetId())
			if err != nil {
				t.Fatal(err)
			}
			want := first.GetIndex()
			if tc.secondMove {
				want = second.GetIndex()
			}
			snap := e.srv.State().Snapshot()
			if got := snap.NodeByID(n.GetId()).GetLastAllocUpdateIndex(); got != want {
				t.Errorf("last alloc update index %d after reports at %d and %d, want %d", got, first.GetIndex(), second.GetIndex(), want)
			}
			if got := snap.AllocByID(allocs[0].GetId()).GetClientStatus(); got != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE {
				t.Errorf("allocation %s after the second report, want complete", got)
			}
		})
	}
}

// TestGetAllocsSinceKnownIndex checks answers relative to the state_index
// of an agent's last answer: only allocations written after it are sent,
// with the job versions no unchanged allocation runs; an allocation
// collected since makes the answer whole, naming the unchanged ones; and
// an index the server cannot vouch for (past its state, or from before a
// restored backup) gets a whole answer.
func TestGetAllocsSinceKnownIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	web, db := e.job(3), e.job(2)
	w := e.place(n, web, 2)
	d := e.place(n, db, 1)
	ask := func(known uint64, count uint32) *droverv1.GetAllocsResponse {
		t.Helper()
		resp, err := e.nodes.GetAllocs(e.ctx(), &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), KnownIndex: known, KnownCount: count})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	type want struct {
		relative              bool
		sent, unchanged, jobs []string
	}
	check := func(what string, resp *droverv1.GetAllocsResponse, w want) {
		t.Helper()
		var sent, jobs []string
		for _, a := range resp.GetAllocs() {
			sent = append(sent, a.GetId())
		}
		for _, j := range resp.GetJobs() {
			jobs = append(jobs, j.GetId())
		}
		if resp.GetSinceKnownIndex() != w.relative {
			t.Errorf("%s: since_known_index %v, want %v", what, resp.GetSinceKnownIndex(), w.relative)
		}
		if resp.GetStateIndex() < resp.GetIndex() || resp.GetStateIndex() > e.latestIndex() {
			t.Errorf("%s: state_index %d, want from %d (index) to %d (applied)", what, resp.GetStateIndex(), resp.GetIndex(), e.latestIndex())
		}
		for _, c := range []struct {
			what      string
			got, want []string
		}{{"sent", sent, w.sent}, {"unchanged", resp.GetUnchangedAllocIds(), w.unchanged}, {"job versions", jobs, w.jobs}} {
			if got, want := slices.Sorted(slices.Values(c.got)), slices.Sorted(slices.Values(c.want)); !slices.Equal(got, want) {
				t.Errorf("%s: %s %v, want %v", what, c.what, got, want)
			}
		}
	}
	ids := func(allocs ...*droverv1.Allocation) []string {
		var out []string
		for _, a := range allocs {
			out = append(out, a.GetId())
		}
		return out
	}
	first := ask(0, 0)
	check("no known index", first, want{sent: ids(w[0], w[1], d[0]), jobs: []string{web.GetId(), db.GetId()}})
	k := first.GetStateIndex()
	check("nothing changed", ask(k, 3), want{relative: true})

	// w0's report moves its modify_index; a second db allocation runs the
	// version d0 runs; the first of api runs a version the agent lacks.
	if _, err := e.report(n, running, w[0].GetId()); err != nil {
		t.Fatal(err)
	}
	d1 := e.place(n, db, 1)[0]
	api := e.job(1)
	a0 := e.place(n, api, 1)[0]
	check("reported, placed", ask(k, 3), want{relative: true, sent: ids(w[0], d1, a0), jobs: []string{api.GetId()}})
	if got := ask(k, 4); got.GetSinceKnownIndex() {
		t.Errorf("an agent naming more allocations than it can hold got a relative answer")
	}
	// Every allocation of web reported on since: they ran web's version
	// at the known index all the same, so the agent holds it.
	if _, err := e.report(n, running, w[1].GetId()); err != nil {
		t.Fatal(err)
	}
	check("a job's all reported", ask(k, 3), want{relative: true, sent: ids(w[0], w[1], d1, a0), jobs: []string{api.GetId()}})
	// Every allocation of web changed by the servers (as an in-place
	// update would, to another version): the version is sent.
	update := &droverv1.PlanResultEntry{AppliedAt: time.Now().UnixNano()}
	for _, a := range w {
		u := e.srv.State().Snapshot().AllocByID(a.GetId()).CloneVT()
		u.DesiredDescription = "updated in place"
		update.Allocations = append(update.Allocations, u)
	}
	e.apply(droverv1.MessageTypePlanResult, update)
	check("a job's all updated", ask(k, 3), want{relative: true, sent: ids(w[0], w[1], d1, a0), jobs: []string{web.GetId(), api.GetId()}})

	// d0, finished, collected: the answer is whole, naming the unchanged.
	if _, err := e.report(n, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, d[0].GetId()); err != nil {
		t.Fatal(err)
	}
	k2 := ask(0, 0).GetStateIndex()
	e.apply(droverv1.MessageTypeGC, &droverv1.GCEntry{AllocIds: []string{d[0].GetId()}})
	check("one collected", ask(k2, 5), want{sent: nil, unchanged: ids(w[0], w[1], d1, a0), jobs: nil})
	check("past the state", ask(e.latestIndex()+10, 4), want{sent: ids(w[0], w[1], d1, a0), jobs: []string{web.GetId(), db.GetId(), api.GetId()}})

	// A backup restored brings back objects at their old modify indexes:
	// an index from before it vouches for nothing.
	ops := droverv1.NewOperatorServiceClient(e.srv.Conn)
	save, err := ops.SnapshotSave(e.ctx(), &droverv1.SnapshotSaveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var backup []byte
	for {
		chunk, err := save.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		backup = append(backup, chunk.GetData()...)
	}
	saved := e.srv.State().Snapshot().AllocByID(a0.GetId()).GetClientStatus()
	if _, err := e.report(n, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, a0.GetId()); err != nil {
		t.Fatal(err)
	}
	k3 := ask(0, 0).GetStateIndex()
	restore, err := ops.SnapshotRestore(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if err := restore.Send(&droverv1.SnapshotChunk{Data: backup}); err != nil {
		t.Fatal(err)
	}
	if _, err := restore.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	check("a backup restored since", ask(k3, 4), want{sent: ids(w[0], w[1], d1, a0), jobs: []string{web.GetId(), db.GetId(), api.GetId()}})
	if got := ask(0, 0).GetAllocs(); !slices.ContainsFunc(got, func(a *droverv1.Allocation) bool {
		return a.GetId() == a0.GetId() && a.GetClientStatus() == saved
	}) {
		t.Errorf("after the restore a0 is not %s as the backup held it: %v", saved, got)
	}
}
