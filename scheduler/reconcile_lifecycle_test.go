package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// rcState is a toy state store: it applies reconcile results the way the
// plan applier and state store do, so that a sequence of evaluations can
// be checked for convergence.
type rcState struct {
	job    *droverv1.Job
	nodes  map[string]*droverv1.Node
	allocs map[string]*droverv1.Allocation
	now    int64
	seq    int
}

func (s *rcState) list() []*droverv1.Allocation {
	return slices.Collect(maps.Values(s.allocs))
}

// eval runs the reconciler as evaluation id and applies the result;
// placements go to the node chosen by pick.
func (s *rcState) eval(t *testing.T, id string, pick func(p placement) string) *reconcileResult {
	t.Helper()
	allocs := s.list()
	res := reconcile(reconcileInput{
		job: s.job, jobVersion: rcVersions(s.job), allocs: allocs, nodes: s.nodes,
		evalID: id, now: s.now,
	})
	rcCheckCounts(t, allocs, res)
	for _, a := range slices.Concat(res.attributeUpdates, res.inplace) {
		c := a.CloneVT()
		c.NextAllocation = s.allocs[a.GetId()].GetNextAllocation()
		s.allocs[a.GetId()] = c
	}
	places := slices.Clone(res.place)
	stops := slices.Clone(res.stop)
	for _, d := range res.destructive {
		places = append(places, d.place)
		stops = append(stops, d.stop)
	}
	for _, st := range stops {
		c := s.allocs[st.alloc.GetId()].CloneVT()
		c.DesiredStatus, c.DesiredDescription = st.desired, st.description
		if st.clientStatus == csLost {
			c.ClientStatus = csLost
			c.AllocStates = append(c.AllocStates, stateAt(csLost, s.now))
		}
		s.allocs[c.GetId()] = c
	}
	for _, p := range places {
		s.seq++
		a := &droverv1.Allocation{
			Id: fmt.Sprintf("p%d", s.seq), Name: p.name, NodeId: pick(p), JobId: s.job.GetId(),
			JobVersion: s.job.GetVersion(), TaskGroup: p.group.GetName(), DesiredStatus: dsRun,
			ClientStatus: csPending, CreateTime: s.now, ModifyTime: s.now,
		}
		if p.previous != nil {
			a.PreviousAllocation = p.previous.GetId()
			prev := s.allocs[p.previous.GetId()].CloneVT()
			prev.NextAllocation = a.GetId()
			s.allocs[prev.GetId()] = prev
		}
		s.allocs[a.GetId()] = a
	}
	return res
}

// report sets the client status of allocations, as an agent does.
func (s *rcState) report(status droverv1.AllocClientStatus, ids ...string) {
	for _, id := range ids {
		c := s.allocs[id].CloneVT()
		c.ClientStatus = status
		c.ModifyTime = s.now
		s.allocs[id] = c
	}
}

// running lists the ids of allocations wanted running and not finished.
func (s *rcState) running() []string {
	var ids []string
	for _, a := range s.allocs {
		if !a.Terminal() {
			ids = append(ids, a.GetId())
		}
	}
	slices.Sort(ids)
	return ids
}

func (s *rcState) setNode(id string, status droverv1.NodeStatus) {
	s.nodes[id] = rcNode(id, status)
}

func TestReconcileDisconnectLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy droverv1.ReconnectStrategy
		// kept is the allocation left running for name index 0 in the end.
		kept string
	}{
		{"keep original", droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_ORIGINAL, "p1"},
		{"keep replacement", droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_REPLACEMENT, "p3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &rcState{
				job:    rcJob(jtService, 2, withDisconnect(10*time.Minute, tc.strategy)),
				nodes:  rcNodes(rcNode("n1", nsReady), rcNode("n2", nsReady), rcNode("n3", nsReady)),
				allocs: make(map[string]*droverv1.Allocation),
				now:    rcNow,
			}
			// First placement: index 0 on n1, index 1 on n2; replacements on n3.
			pick := func(p placement) string {
				if p.previous != nil {
					return "n3"
				}
				if i, _ := allocNameIndex(p.name); i == 0 {
					return "n1"
				}
				return "n2"
			}
			step := func(name string, want rcSummary) {
				t.Helper()
				s.now += int64(time.Second)
				if got := summarize(s.eval(t, name, pick)); !rcEqual(got, want) {
					t.Fatalf("%s:\n got  %+v\n want %+v", name, got, want)
				}
			}

			step("place", rcSummary{place: rcList("j.web[0]", "j.web[1]")})
			s.report(csRunning, "p1", "p2")
			step("steady", rcSummary{})

			s.setNode("n1", nsDisconnected)
			step("disconnect", rcSummary{attr: rcList("p1 unknown followup"), place: rcList("j.web[0]<-p1"), evals: 1})
			s.report(csRunning, "p3")
			step("still disconnected", rcSummary{})

			// Back: initializing, and its agent reports the original running.
			s.setNode("n1", nsInit)
			s.report(csRunning, "p1")
			step("initializing", rcSummary{})

			s.setNode("n1", nsReady)
			res := s.eval(t, "ready", pick)
			if got := len(res.stop); got != 1 || len(res.place) != 0 {
				t.Fatalf("reconnect: %+v", summarize(res))
			}
			step("settled", rcSummary{})
			if got, want := s.running(), []string{"p2", tc.kept}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Errorf("running %v, want %v", got, want)
			}
		})
	}
}

func TestReconcileDisconnectWindowEnds(t *testing.T) {
	s := &rcState{
		job:    rcJob(jtService, 1, withDisconnect(10*time.Minute, droverv1.ReconnectStrategy_RECONNECT_STRATEGY_BEST_SCORE)),
		nodes:  rcNodes(rcNode("n1", nsReady), rcNode("n2", nsReady)),
		allocs: make(map[string]*droverv1.Allocation),
		now:    rcNow,
	}
	pick := func(p placement) string {
		if p.previous != nil {
			return "n2"
		}
		return "n1"
	}
	s.eval(t, "place", pick)
	s.report(csRunning, "p1")
	s.setNode("n1", nsDisconnected)
	res := s.eval(t, "disconnect", pick)
	if len(res.followupEvals) != 1 {
		t.Fatalf("disconnect made %d follow-ups", len(res.followupEvals))
	}
	timeout := res.followupEvals[0]
	s.report(csRunning, "p2")

	s.now = timeout.GetWaitUntil()
	res = s.eval(t, timeout.GetId(), pick)
	if got := summarize(res); !rcEqual(got, rcSummary{stop: rcList("p1: " + allocLost + " (lost)")}) {
		t.Fatalf("window end: %+v", got)
	}
	// The node comes back after the window: nothing changes.
	s.setNode("n1", nsReady)
	s.report(csRunning, "p1")
	if got := summarize(s.eval(t, "late", pick)); !rcEqual(got, rcSummary{}) {
		t.Errorf("late reconnect: %+v", got)
	}
	if got := s.running(); !slices.Equal(got, []string{"p2"}) {
		t.Errorf("running %v, want [p2]", got)
	}
}

func TestReconcileRescheduleLifecycle(t *testing.T) {
	policy := &droverv1.ReschedulePolicy{
		Unlimited: true, Delay: durationpb.New(30 * time.Second), MaxDelay: durationpb.New(time.Hour),
		DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_EXPONENTIAL,
	}
	s := &rcState{
		job:    rcJob(jtService, 1, withPolicy(policy)),
		nodes:  rcNodes(rcNode("n1", nsReady)),
		allocs: make(map[string]*droverv1.Allocation),
		now:    rcNow,
	}
	pick := func(placement) string { return "n1" }
	s.eval(t, "place", pick)
	s.report(csFailed, "p1")
	res := s.eval(t, "failure", pick)
	if len(res.place) != 0 || len(res.followupEvals) != 1 {
		t.Fatalf("failure: %+v", summarize(res))
	}
	first := res.followupEvals[0]
	// An unrelated evaluation before the follow-up is due changes nothing.
	s.now += int64(10 * time.Second)
	if got := summarize(s.eval(t, "unrelated", pick)); !rcEqual(got, rcSummary{}) {
		t.Errorf("unrelated: %+v", got)
	}
	s.now = first.GetWaitUntil()
	res = s.eval(t, first.GetId(), pick)
	if got := summarize(res); !rcEqual(got, rcSummary{place: rcList("j.web[0]<-p1 resched")}) {
		t.Fatalf("follow-up: %+v", got)
	}
	if got := res.place[0].delay; got != int64(30*time.Second) {
		t.Errorf("first reschedule delay %v", time.Duration(got))
	}
	if s.allocs["p2"].PreviousAllocation != "p1" {
		t.Fatalf("replacement %v", s.allocs["p2"])
	}
	// The replacement fails too: the delay doubles.
	c := s.allocs["p2"].CloneVT()
	c.RescheduleTracker = rescheduleTracker(s.allocs["p1"], s.now, res.place[0].delay)
	s.allocs["p2"] = c
	s.report(csFailed, "p2")
	res = s.eval(t, "second failure", pick)
	if len(res.followupEvals) != 1 || res.followupEvals[0].GetWaitUntil() != s.now+int64(time.Minute) {
		t.Fatalf("second failure: %+v, follow-ups %v", summarize(res), res.followupEvals)
	}
}

// rcEqual reports whether two summaries are equal.
func rcEqual(a, b rcSummary) bool {
	return slices.Equal(a.place, b.place) && slices.Equal(a.stop, b.stop) && slices.Equal(a.inplace, b.inplace) &&
		slices.Equal(a.destructive, b.destructive) && slices.Equal(a.attr, b.attr) && a.evals == b.evals
}
