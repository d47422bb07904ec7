package simagent

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	pending  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	running  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	complete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	lost     = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
	unknown  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
	none     = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED

	run  = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
	stop = droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP

	startDelay = 100
	batchRun   = 1000
	now        = 10_000
)

// serverAlloc is an allocation as GetAllocs returns it; job "b" is batch.
func serverAlloc(id, job string, desired droverv1.AllocDesiredStatus, client droverv1.AllocClientStatus, modify uint64) *droverv1.Allocation {
	return &droverv1.Allocation{Id: id, JobId: job, DesiredStatus: desired, ClientStatus: client, ModifyIndex: modify}
}

func answer(allocs ...*droverv1.Allocation) *droverv1.GetAllocsResponse {
	return &droverv1.GetAllocsResponse{
		Allocs: allocs,
		Jobs: []*droverv1.Job{
			{Id: "s", Type: droverv1.JobType_JOB_TYPE_SERVICE},
			{Id: "b", Type: droverv1.JobType_JOB_TYPE_BATCH},
		},
	}
}

func setOf(m map[string]simAlloc) *allocSet {
	s := newAllocSet(startDelay, batchRun, 0, 0)
	for id, a := range m {
		s.m[id] = &a
	}
	s.resetLiveLocked()
	return s
}

func checkSet(t *testing.T, s *allocSet, want map[string]simAlloc) {
	t.Helper()
	got := make(map[string]simAlloc, len(s.m))
	for id, a := range s.m {
		got[id] = *a
	}
	if !maps.Equal(got, want) {
		t.Errorf("allocations\n got %+v\nwant %+v", got, want)
	}
	walked := make(map[droverv1.AllocClientStatus]int)
	for _, a := range s.m {
		walked[a.status]++
	}
	counted := make(map[droverv1.AllocClientStatus]int)
	s.count(counted)
	if !maps.Equal(counted, walked) {
		t.Errorf("count says %v, the allocations are %v", counted, walked)
	}
	checkLive(t, s)
}

// checkLive checks that the set's live allocations are those of its
// allocations that are not quiet, and that it counts the others.
func checkLive(t *testing.T, s *allocSet) {
	t.Helper()
	var settled [numClientStatuses]int
	for id, a := range s.m {
		_, live := s.live[id]
		if !live {
			settled[statusSlot(a.status)]++
		}
		if !live && !a.quiet() {
			t.Errorf("allocation %s %+v calls for something but is not live", id, *a)
		}
	}
	for id, a := range s.live {
		if s.m[id] != a {
			t.Errorf("live allocation %s is not the set's", id)
		}
	}
	if settled != s.settled {
		t.Errorf("settled counts %v, want %v", s.settled, settled)
	}
}

func TestAllocSetApply(t *testing.T) {
	acked := func(st droverv1.AllocClientStatus, index uint64) simAlloc {
		return simAlloc{status: st, reported: st, ackIndex: index}
	}
	for _, tc := range []struct {
		name   string
		local  map[string]simAlloc
		answer *droverv1.GetAllocsResponse
		want   map[string]simAlloc
		change change
	}{{
		name:   "a new allocation starts pending, as the servers hold it: nothing to report until it starts",
		answer: answer(serverAlloc("a", "s", run, pending, 5)),
		want:   map[string]simAlloc{"a": {status: pending, reported: pending, ackIndex: 5, next: now + startDelay}},
		change: change{next: now + startDelay},
	}, {
		name:   "a new allocation the servers hold in no status starts pending and is reported",
		answer: answer(serverAlloc("a", "s", run, none, 5)),
		want:   map[string]simAlloc{"a": {status: pending, next: now + startDelay}},
		change: change{dirty: true, next: now + startDelay},
	}, {
		name:   "an allocation the servers believe running is adopted as running",
		answer: answer(serverAlloc("a", "s", run, running, 5)),
		want:   map[string]simAlloc{"a": acked(running, 5)},
	}, {
		name:   "adopted running batch work finishes after its run time",
		answer: answer(serverAlloc("a", "b", run, running, 5)),
		want:   map[string]simAlloc{"a": {status: running, reported: running, ackIndex: 5, batch: true, next: now + batchRun}},
		change: change{next: now + batchRun},
	}, {
		name:   "an unknown allocation is adopted running and reported again",
		answer: answer(serverAlloc("a", "s", run, unknown, 5)),
		want:   map[string]simAlloc{"a": {status: running}},
		change: change{dirty: true},
	}, {
		name:   "an allocation stopped before it started is reported complete",
		answer: answer(serverAlloc("a", "s", stop, pending, 5)),
		want:   map[string]simAlloc{"a": {status: complete}},
		change: change{dirty: true},
	}, {
		name:   "a running allocation the servers want stopped completes",
		local:  map[string]simAlloc{"a": acked(running, 5)},
		answer: answer(serverAlloc("a", "s", stop, running, 7)),
		want:   map[string]simAlloc{"a": {status: complete, reported: running, ackIndex: 5}},
		change: change{dirty: true},
	}, {
		name:   "a pending allocation the servers want stopped completes at once",
		local:  map[string]simAlloc{"a": {status: pending, reported: pending, ackIndex: 5, next: now + 50}},
		answer: answer(serverAlloc("a", "s", stop, pending, 7)),
		want:   map[string]simAlloc{"a": {status: complete, reported: pending, ackIndex: 5}},
		change: change{dirty: true},
	}, {
		name:   "the servers doubting an acknowledged status hear it again",
		local:  map[string]simAlloc{"a": acked(running, 10)},
		answer: answer(serverAlloc("a", "s", run, unknown, 12)),
		want:   map[string]simAlloc{"a": {status: running, ackIndex: 10}},
		change: change{dirty: true},
	}, {
		name:   "an answer older than the acknowledgement changes nothing",
		local:  map[string]simAlloc{"a": acked(running, 10)},
		answer: answer(serverAlloc("a", "s", run, pending, 8)),
		want:   map[string]simAlloc{"a": acked(running, 10)},
	}, {
		name:   "a change not yet acknowledged is not sent twice",
		local:  map[string]simAlloc{"a": {status: running, reported: pending, ackIndex: 5}},
		answer: answer(serverAlloc("a", "s", run, pending, 5)),
		want:   map[string]simAlloc{"a": {status: running, reported: pending, ackIndex: 5}},
		change: change{dirty: true},
	}, {
		name:   "a finished allocation the servers recorded is forgotten",
		local:  map[string]simAlloc{"a": acked(complete, 9)},
		answer: answer(serverAlloc("a", "s", stop, complete, 9)),
		want:   map[string]simAlloc{},
	}, {
		name:   "a lost allocation is forgotten",
		local:  map[string]simAlloc{"a": acked(running, 3)},
		answer: answer(serverAlloc("a", "s", run, lost, 9)),
		want:   map[string]simAlloc{},
	}, {
		name: "collected allocations are forgotten once reported, live ones kept",
		local: map[string]simAlloc{
			"done":    acked(complete, 3),
			"unsent":  {status: complete, reported: running},
			"running": acked(running, 3),
		},
		answer: answer(),
		want: map[string]simAlloc{
			"unsent":  {status: complete, reported: running},
			"running": acked(running, 3),
		},
		change: change{dirty: true},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := setOf(tc.local)
			if got := s.apply(tc.answer, now); got != tc.change {
				t.Errorf("change %+v, want %+v", got, tc.change)
			}
			checkSet(t, s, tc.want)
		})
	}
}

func TestAllocSetAdvance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		local  map[string]simAlloc
		want   map[string]simAlloc
		change change
	}{{
		name:   "pending service work starts running for good",
		local:  map[string]simAlloc{"a": {status: pending, reported: pending, next: now}},
		want:   map[string]simAlloc{"a": {status: running, reported: pending}},
		change: change{dirty: true},
	}, {
		name:   "pending batch work starts running until its run time",
		local:  map[string]simAlloc{"a": {status: pending, reported: pending, batch: true, next: now - 1}},
		want:   map[string]simAlloc{"a": {status: running, reported: pending, batch: true, next: now + batchRun}},
		change: change{dirty: true, next: now + batchRun},
	}, {
		name:   "batch work completes at its time",
		local:  map[string]simAlloc{"a": {status: running, reported: running, batch: true, next: now}},
		want:   map[string]simAlloc{"a": {status: complete, reported: running, batch: true}},
		change: change{dirty: true},
	}, {
		name:   "work whose time has not come waits",
		local:  map[string]simAlloc{"a": {status: pending, reported: pending, next: now + 5}},
		want:   map[string]simAlloc{"a": {status: pending, reported: pending, next: now + 5}},
		change: change{next: now + 5},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := setOf(tc.local)
			if got := s.advance(now); got != tc.change {
				t.Errorf("change %+v, want %+v", got, tc.change)
			}
			checkSet(t, s, tc.want)
		})
	}
}

func TestAllocSetReportsAndAcks(t *testing.T) {
	s := setOf(map[string]simAlloc{
		"a": {status: running, reported: pending},
		"b": {status: complete, reported: running},
		"c": {status: running, reported: running, ackIndex: 4},
		"d": {status: complete, reported: complete, ackIndex: 4},
	})
	sent := s.reports()
	if len(sent) != 2 {
		t.Fatalf("reports %v, want a and b", sent)
	}
	s.m["a"].status = complete // changed while the report was in flight
	if more := s.acked(sent, 9, []string{"b"}); !more {
		t.Error("acked says nothing remains, want a's completion")
	}
	checkSet(t, s, map[string]simAlloc{
		"a": {status: complete, reported: pending},
		"c": {status: running, reported: running, ackIndex: 4},
		"d": {status: complete, reported: complete, ackIndex: 4},
	})
	s.resync() // d finished and was acknowledged: it is not sent again
	if !s.hasReports() || len(s.reports()) != 2 {
		t.Errorf("after resync: reports %v, want a and c", s.reports())
	}
	counts := make(map[droverv1.AllocClientStatus]int)
	s.count(counts)
	if want := map[droverv1.AllocClientStatus]int{complete: 2, running: 1}; !maps.Equal(counts, want) {
		t.Errorf("count %v, want %v", counts, want)
	}
}

func TestFailsIsDeterministicAndProportional(t *testing.T) {
	failed := 0
	for i := range 10000 {
		id := fmt.Sprintf("alloc-%d", i)
		f := Fails(id, 0.2)
		if f != Fails(id, 0.2) {
			t.Fatalf("Fails(%s) changed its answer", id)
		}
		if Fails(id, 0) || !Fails(id, 1) {
			t.Fatalf("Fails(%s) ignores rates 0 and 1", id)
		}
		if f {
			failed++
		}
	}
	if failed < 1800 || failed > 2200 {
		t.Errorf("%d of 10000 fail at rate 0.2, want about 2000", failed)
	}
}

func TestAllocSetFailures(t *testing.T) {
	failed := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
	for _, tc := range []struct {
		name  string
		local simAlloc
		want  simAlloc
	}{
		{
			name:  "a failing service allocation fails instead of running",
			local: simAlloc{status: pending, reported: pending, fails: true, next: now},
			want:  simAlloc{status: failed, reported: pending, fails: true},
		},
		{
			name:  "a failing batch allocation runs first",
			local: simAlloc{status: pending, reported: pending, fails: true, batch: true, next: now},
			want:  simAlloc{status: running, reported: pending, fails: true, batch: true, next: now + batchRun},
		},
		{
			name:  "then fails instead of completing",
			local: simAlloc{status: running, reported: running, fails: true, batch: true, next: now},
			want:  simAlloc{status: failed, reported: running, fails: true, batch: true},
		},
		{
			name:  "a healthy batch allocation completes",
			local: simAlloc{status: running, reported: running, batch: true, next: now},
			want:  simAlloc{status: complete, reported: running, batch: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setOf(map[string]simAlloc{"a": tc.local})
			s.advance(now)
			checkSet(t, s, map[string]simAlloc{"a": tc.want})
		})
	}
}

func TestAllocSetAdoptsTheFailureOfItsID(t *testing.T) {
	s := newAllocSet(startDelay, batchRun, 0.5, 0)
	var ids []string
	for i := range 50 {
		ids = append(ids, fmt.Sprintf("a%d", i))
	}
	var allocs []*droverv1.Allocation
	for _, id := range ids {
		allocs = append(allocs, serverAlloc(id, "s", run, pending, 5))
	}
	s.apply(answer(allocs...), now)
	for _, id := range ids {
		if got, want := s.m[id].fails, Fails(id, 0.5); got != want {
			t.Errorf("allocation %s fails %v, want %v", id, got, want)
		}
	}
}

// TestAllocSetHealth follows allocations of a deployment: healthy after the
// group's min_healthy_time running, unhealthy when the job version says so
// (UnhealthyMetaKey) or when they fail; each reported once acknowledged.
func TestAllocSetHealth(t *testing.T) {
	const minHealthy = 500
	jobWith := func(meta map[string]string) *droverv1.Job {
		return &droverv1.Job{Id: "s", Type: droverv1.JobType_JOB_TYPE_SERVICE, Meta: meta, TaskGroups: []*droverv1.TaskGroup{{
			Name: "g", Update: &droverv1.UpdateStrategy{MinHealthyTime: durationpb.New(minHealthy)}}}}
	}
	for _, tc := range []struct {
		name        string
		job         *droverv1.Job
		failureRate float64
		want        *bool
		at          int64
	}{
		{"healthy after min_healthy_time", jobWith(nil), 0, proto.Bool(true), now + startDelay + minHealthy},
		{"a bad version", jobWith(map[string]string{UnhealthyMetaKey: "1"}), 0, proto.Bool(false), now + startDelay + minHealthy},
		{"failed", jobWith(nil), 1, proto.Bool(false), now + startDelay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAllocSet(startDelay, batchRun, tc.failureRate, 0)
			a := &droverv1.Allocation{Id: "a", JobId: "s", TaskGroup: "g", DesiredStatus: run, ClientStatus: pending, ModifyIndex: 5, DeploymentId: "d1"}
			s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{a}, Jobs: []*droverv1.Job{tc.job}}, now)
			for t0 := int64(now); t0 <= tc.at; {
				c := s.advance(t0)
				if c.next == 0 || c.next <= t0 {
					break
				}
				t0 = c.next
			}
			reports := s.reports()
			if len(reports) != 1 || reports[0].Healthy == nil || reports[0].GetHealthy() != *tc.want || reports[0].GetHealthTimestamp() != tc.at {
				t.Fatalf("reports %v, want health %v decided at %d", reports, *tc.want, tc.at)
			}
			if s.acked(reports, 9, nil) {
				t.Errorf("changes remain after the servers acknowledged the health")
			}
		})
	}
}

// heldJobs lists the job versions an agent holds, as id@version/job_modify_index.
func heldJobs(s *allocSet) []string {
	var out []string
	for k, j := range s.jobs {
		out = append(out, fmt.Sprintf("%s@%d/%d", k.id, k.version, j.GetJobModifyIndex()))
	}
	slices.Sort(out)
	return out
}

// TestAllocSetHoldsJobVersions checks that an agent keeps the job versions
// of its allocations between answers and forgets a version once no
// allocation of the answer runs it: a batch allocation placed after the
// answer that carried its job still runs as batch when the servers leave
// the job out.
func TestAllocSetHoldsJobVersions(t *testing.T) {
	s := newAllocSet(startDelay, batchRun, 0, 0)
	pending := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING
	run := droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
	first := answer(serverAlloc("a1", "b", run, pending, 5), serverAlloc("a2", "s", run, pending, 5))
	first.Jobs[1].JobModifyIndex = 4
	s.apply(first, now)
	if got, want := heldJobs(s), []string{"b@0/4", "s@0/0"}; !slices.Equal(got, want) {
		t.Fatalf("job versions held after the first answer %v, want %v", got, want)
	}
	// The next answer, whole, leaves both jobs out, as the servers do for
	// versions the agent holds; a2 is gone (collected).
	s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{
		serverAlloc("a1", "b", run, pending, 5), serverAlloc("a3", "b", run, pending, 6)}}, now)
	if !s.m["a3"].batch {
		t.Error("a3 of batch job b adopted as a service allocation: the held job version was not used")
	}
	if got, want := heldJobs(s), []string{"b@0/4"}; !slices.Equal(got, want) {
		t.Errorf("job versions held after job s left the node %v, want %v", got, want)
	}
	// A relative answer moves a1 and a3 in place to version 1 of job b,
	// which it carries: version 0 has no allocation here any more.
	moved := func(id string) *droverv1.Allocation {
		a := serverAlloc(id, "b", run, pending, 7)
		a.JobVersion = 1
		return a
	}
	s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{moved("a1"), moved("a3")},
		Jobs: []*droverv1.Job{{Id: "b", Version: 1, Type: droverv1.JobType_JOB_TYPE_BATCH, JobModifyIndex: 7}}, SinceKnownIndex: true}, now)
	if got, want := heldJobs(s), []string{"b@1/7"}; !slices.Equal(got, want) {
		t.Errorf("job versions held after an update in place %v, want %v", got, want)
	}
	checkLive(t, s)
}

// TestAllocSetHoldsServerView checks what an agent names in GetAllocs
// (the state_index of its last answer and how many allocations that
// answer left it) and how it merges the two kinds of answer: one relative
// to that index keeps every allocation it does not send, with its state
// and job version; a whole one keeps only those it names unchanged, and a
// finished allocation in neither list is dropped (collected).
func TestAllocSetHoldsServerView(t *testing.T) {
	s := newAllocSet(startDelay, batchRun, 0, 0)
	first := answer(serverAlloc("a1", "b", run, pending, 5), serverAlloc("a2", "s", run, complete, 6), serverAlloc("a3", "s", run, pending, 7))
	first.StateIndex = 8
	s.apply(first, now)
	checkKnown := func(when string, index uint64, count uint32) {
		t.Helper()
		if gotIndex, gotCount := s.known(); gotIndex != index || gotCount != count {
			t.Errorf("%s: known index %d and count %d, want %d and %d", when, gotIndex, gotCount, index, count)
		}
	}
	checkKnown("after the first answer", 8, 3)
	a1 := *s.m["a1"]
	s.m["a2"] = &simAlloc{status: complete, reported: complete} // finished and acknowledged
	s.resetLiveLocked()

	// Relative: a3 changed (stopped); a1 and a2 held as they were.
	s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{serverAlloc("a3", "s", stop, pending, 9)},
		StateIndex: 10, SinceKnownIndex: true}, now+1)
	checkKnown("after a relative answer", 10, 3)
	if got := s.m["a1"]; got == nil || *got != a1 {
		t.Errorf("a1, not sent, became %+v, want %+v as it was", got, a1)
	}
	if _, ok := s.m["a2"]; !ok {
		t.Error("a2, finished and not sent by a relative answer, was dropped")
	}
	if got, want := s.m["a3"].status, complete; got != want {
		t.Errorf("a3 stopped by the servers is %s, want %s", got, want)
	}
	if got, want := heldJobs(s), []string{"b@0/0", "s@0/0"}; !slices.Equal(got, want) {
		t.Errorf("job versions held %v, want %v: unchanged allocations still run theirs", got, want)
	}

	// Whole: a1 named unchanged, a3 sent again; a2, in neither, collected.
	s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{serverAlloc("a3", "s", stop, complete, 11)},
		UnchangedAllocIds: []string{"a1"}, StateIndex: 12}, now+2)
	checkKnown("after a whole answer", 12, 2)
	if got := s.m["a1"]; got == nil || *got != a1 {
		t.Errorf("a1 named unchanged became %+v, want %+v as it was", got, a1)
	}
	if _, ok := s.m["a2"]; ok {
		t.Error("a2, finished and in neither list of a whole answer, was kept")
	}
	if got, want := heldJobs(s), []string{"b@0/0", "s@0/0"}; !slices.Equal(got, want) {
		t.Errorf("job versions held %v, want %v", got, want)
	}
	checkLive(t, s)
}

// BenchmarkFleetAllocCount counts the allocations of 5,000 agents holding
// 200 each, as the load driver's progress line and goal check do every
// second of the full C1M: 180 of each agent's run settled and 20 wait to
// start, about the share of live allocations in the full C1M.
//
//	go test -run '^$' -bench FleetAllocCount -count 5 ./internal/simagent/
func BenchmarkFleetAllocCount(b *testing.B) {
	sets := make([]*allocSet, 5000)
	for i := range sets {
		m := make(map[string]simAlloc, 200)
		for j := range 200 {
			a := simAlloc{status: running, reported: running}
			if j < 20 {
				a = simAlloc{status: pending, next: now + startDelay}
			}
			m[fmt.Sprintf("%d-%d", i, j)] = a
		}
		sets[i] = setOf(m)
	}
	for b.Loop() {
		into := make(map[droverv1.AllocClientStatus]int)
		for _, s := range sets {
			s.count(into)
		}
		if into[running] != 900_000 || into[pending] != 100_000 {
			b.Fatalf("counted %v", into)
		}
	}
}

// BenchmarkAgentAnswer is what an agent holding 200 running allocations
// does for each new one, as in the full C1M: take the answer that brings
// it, start it, report it and take the acknowledgement; then an answer
// that says it completed takes it away again, so that the agent holds
// 200 at every iteration.
//
//	go test -run '^$' -bench AgentAnswer -count 5 ./internal/simagent/
func BenchmarkAgentAnswer(b *testing.B) {
	held := make(map[string]simAlloc, 200)
	for j := range 200 {
		held[fmt.Sprintf("held-%d", j)] = simAlloc{status: running, reported: running, ackIndex: 1}
	}
	s := setOf(held)
	s.apply(answer(), now) // the jobs
	i := 0
	for b.Loop() {
		i++
		index := uint64(10 + i)
		s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{serverAlloc(fmt.Sprintf("new-%d", i), "s", run, pending, index)},
			StateIndex: index, SinceKnownIndex: true}, now)
		s.advance(now + startDelay)
		sent := s.reports()
		if len(sent) != 1 {
			b.Fatalf("reports %v, want the new allocation's", sent)
		}
		s.acked(sent, index, nil)
		s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{serverAlloc(fmt.Sprintf("new-%d", i), "s", stop, complete, index+1)},
			StateIndex: index + 1, SinceKnownIndex: true}, now)
		if len(s.m) != 200 {
			b.Fatalf("the agent holds %d allocations, want 200", len(s.m))
		}
	}
}

// BenchmarkAgentAdvance is an agent of the full C1M while placements
// arrive: it holds 200 allocations, 40 of them pending, each due to start
// at its own time. Each iteration brings one more, moves the clock to the
// start of the oldest pending one, reports it running, takes the
// acknowledgement, and then an answer that it completed, so that the
// agent holds 200 with 40 pending at every iteration.
//
//	go test -run '^$' -bench AgentAdvance -count 5 ./internal/simagent/
func BenchmarkAgentAdvance(b *testing.B) {
	const pendingHeld, spacing = 40, 2 // pendingHeld·spacing < startDelay
	held := make(map[string]simAlloc, 200)
	for j := range 200 - pendingHeld {
		held[fmt.Sprintf("held-%d", j)] = simAlloc{status: running, reported: running, ackIndex: 1}
	}
	s := setOf(held)
	s.apply(answer(), now) // the jobs
	arrive := func(j int) {
		index := uint64(10 + 2*j)
		s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{serverAlloc(fmt.Sprintf("new-%d", j), "s", run, pending, index)},
			StateIndex: index, SinceKnownIndex: true}, now+int64(spacing*j))
	}
	for j := range pendingHeld {
		arrive(j)
	}
	i := pendingHeld
	for b.Loop() {
		arrive(i)
		started := i - pendingHeld
		s.advance(now + int64(spacing*started) + startDelay)
		sent := s.reports()
		if len(sent) != 1 || sent[0].GetAllocId() != fmt.Sprintf("new-%d", started) {
			b.Fatalf("reports %v, want new-%d's", sent, started)
		}
		index := uint64(10 + 2*i + 1)
		s.acked(sent, index, nil)
		s.apply(&droverv1.GetAllocsResponse{Allocs: []*droverv1.Allocation{serverAlloc(sent[0].GetAllocId(), "s", stop, complete, index)},
			StateIndex: index, SinceKnownIndex: true}, now)
		if len(s.m) != 200 || len(s.live) != pendingHeld {
			b.Fatalf("the agent holds %d allocations, %d live; want 200, %d", len(s.m), len(s.live), pendingHeld)
		}
		i++
	}
}
