package state

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	eligible   = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE
	ineligible = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
)

// startDrain starts a drain of the node.
func (f *fixture) startDrain(nodeID string) {
	f.t.Helper()
	e := &droverv1.NodeDrainEntry{NodeId: nodeID, DrainStrategy: &droverv1.DrainStrategy{StartedAt: 10}}
	if _, err := f.s.UpdateNodeDrain(f.next(), e); err != nil {
		f.t.Fatalf("start drain of node %s: %v", nodeID, err)
	}
}

// setEligibility writes the node's eligibility.
func (f *fixture) setEligibility(nodeID string, el droverv1.SchedulingEligibility) {
	f.t.Helper()
	if _, err := f.s.UpdateNodeEligibility(f.next(), &droverv1.NodeEligibilityEntry{NodeId: nodeID, Eligibility: el}); err != nil {
		f.t.Fatalf("set eligibility of node %s: %v", nodeID, err)
	}
}

// adminEvals returns an evaluation about the node and one about no node,
// both of a job registered in f.
func (f *fixture) adminEvals(nodeID string) (about, other *droverv1.Evaluation) {
	job := f.job(1)
	about = mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	about.NodeId = nodeID
	other = mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE)
	return about, other
}

// checkNodeWrite checks what an accepted admin entry at index did to the
// node (event, modify index) and its evaluations (written, the one about
// the node told the index).
func checkNodeWrite(t *testing.T, f *fixture, before *droverv1.Node, index uint64, ev *droverv1.NodeEvent, about, other *droverv1.Evaluation) {
	t.Helper()
	snap := f.s.Snapshot()
	got := snap.NodeByID(before.GetId())
	if got.GetModifyIndex() != index {
		t.Errorf("node modify index = %d, want %d", got.GetModifyIndex(), index)
	}
	events := got.GetEvents()
	if len(events) != len(before.GetEvents())+1 {
		t.Fatalf("node has %d events, want %d", len(events), len(before.GetEvents())+1)
	}
	if last := events[len(events)-1]; last.GetMessage() != ev.GetMessage() || last.GetCreateIndex() != index {
		t.Errorf("last event = %v, want %q at index %d", last, ev.GetMessage(), index)
	}
	if got.GetStatus() != before.GetStatus() || got.GetCreateIndex() != before.GetCreateIndex() {
		t.Errorf("status/create index %s/%d, want unchanged %s/%d", got.GetStatus(), got.GetCreateIndex(), before.GetStatus(), before.GetCreateIndex())
	}
	a, o := snap.EvalByID(about.GetId()), snap.EvalByID(other.GetId())
	if a == nil || o == nil {
		t.Fatalf("evaluations not written: about node %v, other %v", a, o)
	}
	if a.GetNodeModifyIndex() != index || a.GetCreateIndex() != index {
		t.Errorf("eval about the node: node modify index %d, create index %d; want %d", a.GetNodeModifyIndex(), a.GetCreateIndex(), index)
	}
	if o.GetNodeModifyIndex() != 0 {
		t.Errorf("eval about no node got node modify index %d", o.GetNodeModifyIndex())
	}
}

// checkRefused checks that a refused admin entry left the node as it was
// and wrote none of its evaluations.
func checkRefused(t *testing.T, f *fixture, before *droverv1.Node, evals ...*droverv1.Evaluation) {
	t.Helper()
	snap := f.s.Snapshot()
	if before != nil {
		if got := snap.NodeByID(before.GetId()); !proto.Equal(got, before) {
			t.Errorf("refused entry changed the node:\n got %v\nwant %v", got, before)
		}
	}
	for _, ev := range evals {
		if snap.EvalByID(ev.GetId()) != nil {
			t.Errorf("refused entry wrote eval %s", ev.GetId())
		}
	}
}

func TestUpdateNodeEligibility(t *testing.T) {
	cases := []struct {
		name     string
		draining bool
		start    droverv1.SchedulingEligibility
		set      droverv1.SchedulingEligibility
		unknown  bool // the entry names a node that does not exist
		wantErr  error
	}{
		{name: "disable", start: eligible, set: ineligible},
		{name: "enable", start: ineligible, set: eligible},
		{name: "disable again", start: ineligible, set: ineligible},
		{name: "disable while draining", draining: true, set: ineligible},
		{name: "enable while draining", draining: true, set: eligible, wantErr: ErrConflict},
		{name: "unspecified", start: eligible, set: droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_UNSPECIFIED, wantErr: ErrInvalidEntry},
		{name: "out of range", start: eligible, set: 42, wantErr: ErrInvalidEntry},
		{name: "unknown node", set: ineligible, unknown: true, wantErr: ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			f.setStatus(n.GetId(), ready)
			switch {
			case tc.draining:
				f.startDrain(n.GetId())
			case tc.start == ineligible:
				f.setEligibility(n.GetId(), ineligible)
			}
			about, other := f.adminEvals(n.GetId())
			before := f.s.Snapshot().NodeByID(n.GetId())
			target := n.GetId()
			if tc.unknown {
				target = mock.ID()
			}
			ev := &droverv1.NodeEvent{Message: "eligibility changed", Subsystem: "Cluster", Time: 20}
			index := f.next()
			_, err := f.s.UpdateNodeEligibility(index, &droverv1.NodeEligibilityEntry{
				NodeId: target, Eligibility: tc.set, Event: ev, UpdatedAt: 20, Evals: []*droverv1.Evaluation{about, other},
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				checkRefused(t, f, before, about, other)
				return
			}
			got := f.s.Snapshot().NodeByID(n.GetId())
			if got.GetSchedulingEligibility() != tc.set {
				t.Errorf("eligibility = %s, want %s", got.GetSchedulingEligibility(), tc.set)
			}
			if !proto.Equal(got.GetDrainStrategy(), before.GetDrainStrategy()) {
				t.Errorf("drain strategy %v -> %v", before.GetDrainStrategy(), got.GetDrainStrategy())
			}
			checkNodeWrite(t, f, before, index, ev, about, other)
		})
	}
}

func TestUpdateNodeDrain(t *testing.T) {
	strategy := &droverv1.DrainStrategy{Deadline: 1_000, StartedAt: 30}
	cases := []struct {
		name     string
		draining bool
		start    droverv1.SchedulingEligibility
		entry    *droverv1.NodeDrainEntry // node id, event and evals are filled in
		// staleIndex sets expected_modify_index to one the node no longer has;
		// currentIndex sets it to the node's.
		staleIndex, currentIndex bool
		unknown                  bool
		wantErr                  error
		wantEligibility          droverv1.SchedulingEligibility
		wantDrain                bool
	}{
		{name: "start", start: eligible, entry: &droverv1.NodeDrainEntry{DrainStrategy: strategy},
			wantEligibility: ineligible, wantDrain: true},
		{name: "start with mark_eligible stays ineligible", start: eligible, entry: &droverv1.NodeDrainEntry{DrainStrategy: strategy, MarkEligible: true},
			wantEligibility: ineligible, wantDrain: true},
		{name: "start on an ineligible node", start: ineligible, entry: &droverv1.NodeDrainEntry{DrainStrategy: strategy},
			wantEligibility: ineligible, wantDrain: true},
		{name: "update a running drain", draining: true, entry: &droverv1.NodeDrainEntry{DrainStrategy: strategy},
			wantEligibility: ineligible, wantDrain: true},
		{name: "end keeps ineligible", draining: true, entry: &droverv1.NodeDrainEntry{},
			wantEligibility: ineligible},
		{name: "end with mark_eligible", draining: true, entry: &droverv1.NodeDrainEntry{MarkEligible: true},
			wantEligibility: eligible},
		{name: "end without a drain keeps eligibility", start: eligible, entry: &droverv1.NodeDrainEntry{},
			wantEligibility: eligible},
		{name: "expected modify index matches", start: eligible, currentIndex: true, entry: &droverv1.NodeDrainEntry{DrainStrategy: strategy},
			wantEligibility: ineligible, wantDrain: true},
		{name: "expected modify index stale", start: eligible, staleIndex: true, entry: &droverv1.NodeDrainEntry{DrainStrategy: strategy},
			wantErr: ErrConflict},
		{name: "stale index cannot end a drain", draining: true, staleIndex: true, entry: &droverv1.NodeDrainEntry{MarkEligible: true},
			wantErr: ErrConflict},
		{name: "unknown node", unknown: true, entry: &droverv1.NodeDrainEntry{DrainStrategy: strategy},
			wantErr: ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.node()
			f.setStatus(n.GetId(), ready)
			switch {
			case tc.draining:
				f.startDrain(n.GetId())
			case tc.start == ineligible:
				f.setEligibility(n.GetId(), ineligible)
			}
			about, other := f.adminEvals(n.GetId())
			before := f.s.Snapshot().NodeByID(n.GetId())
			e := tc.entry.CloneVT()
			e.NodeId = n.GetId()
			if tc.unknown {
				e.NodeId = mock.ID()
			}
			switch {
			case tc.currentIndex:
				e.ExpectedModifyIndex = before.GetModifyIndex()
			case tc.staleIndex:
				e.ExpectedModifyIndex = before.GetModifyIndex() - 1
			}
			e.Event = &droverv1.NodeEvent{Message: "drain changed", Subsystem: "Drain", Time: 30}
			e.Evals = []*droverv1.Evaluation{about, other}
			index := f.next()
			_, err := f.s.UpdateNodeDrain(index, e)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				checkRefused(t, f, before, about, other)
				return
			}
			got := f.s.Snapshot().NodeByID(n.GetId())
			if got.GetSchedulingEligibility() != tc.wantEligibility {
				t.Errorf("eligibility = %s, want %s", got.GetSchedulingEligibility(), tc.wantEligibility)
			}
			switch {
			case tc.wantDrain && !proto.Equal(got.GetDrainStrategy(), strategy):
				t.Errorf("drain strategy = %v, want %v", got.GetDrainStrategy(), strategy)
			case !tc.wantDrain && got.GetDrainStrategy() != nil:
				t.Errorf("drain strategy = %v, want none", got.GetDrainStrategy())
			}
			checkNodeWrite(t, f, before, index, e.GetEvent(), about, other)
		})
	}
}

// A drain and eligibility together: a draining node refuses to become
// eligible until the drain ends, and then accepts.
func TestDrainBlocksEligibilityUntilItEnds(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	f.startDrain(n.GetId())
	_, err := f.s.UpdateNodeEligibility(f.next(), &droverv1.NodeEligibilityEntry{NodeId: n.GetId(), Eligibility: eligible})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("enable while draining: err = %v, want ErrConflict", err)
	}
	if _, err := f.s.UpdateNodeDrain(f.next(), &droverv1.NodeDrainEntry{NodeId: n.GetId()}); err != nil {
		t.Fatal(err)
	}
	if got := f.s.Snapshot().NodeByID(n.GetId()).GetSchedulingEligibility(); got != ineligible {
		t.Fatalf("after the drain ended: %s, want still ineligible", got)
	}
	f.setEligibility(n.GetId(), eligible)
	if got := f.s.Snapshot().NodeByID(n.GetId()).GetSchedulingEligibility(); got != eligible {
		t.Errorf("after the drain ended and the node was enabled: %s, want eligible", got)
	}
}

// TestDrainingNodes lists the nodes being drained, in id order, through
// drains starting and ending and a node registering again mid-drain.
func TestDrainingNodes(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.node(), f.node(), f.node()
	draining := func() []string {
		var ids []string
		for n := range f.s.Snapshot().DrainingNodes() {
			ids = append(ids, n.GetId())
		}
		return ids
	}
	if got := draining(); len(got) != 0 {
		t.Fatalf("draining before any drain: %v", got)
	}
	f.startDrain(a.GetId())
	f.startDrain(c.GetId())
	want := []string{a.GetId(), c.GetId()}
	slices.Sort(want)
	if got := draining(); !slices.Equal(got, want) {
		t.Errorf("draining %v, want %v", got, want)
	}
	// A registration keeps the drain.
	if _, err := upsertNode(f.s, f.next(), c.CloneVT(), 9); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.UpdateNodeDrain(f.next(), &droverv1.NodeDrainEntry{NodeId: a.GetId()}); err != nil {
		t.Fatal(err)
	}
	if got := draining(); !slices.Equal(got, []string{c.GetId()}) {
		t.Errorf("after the drain of %s ended: draining %v, want only %s (not %s)", a.GetId(), got, c.GetId(), b.GetId())
	}
}

// Admin entries without an event leave the history alone; with events, the
// history keeps the newest maxNodeEvents.
func TestNodeAdminEventHistory(t *testing.T) {
	f := newFixture(t)
	n := f.node()
	f.setEligibility(n.GetId(), ineligible)
	if got := f.s.Snapshot().NodeByID(n.GetId()).GetEvents(); len(got) != len(n.GetEvents()) {
		t.Fatalf("an entry without an event changed the history: %v", got)
	}
	var last uint64
	for i := range maxNodeEvents + 3 {
		last = f.next()
		ev := &droverv1.NodeEvent{Message: fmt.Sprintf("event %d", i), Subsystem: "Cluster"}
		if _, err := f.s.UpdateNodeEligibility(last, &droverv1.NodeEligibilityEntry{NodeId: n.GetId(), Eligibility: ineligible, Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	events := f.s.Snapshot().NodeByID(n.GetId()).GetEvents()
	if len(events) != maxNodeEvents {
		t.Fatalf("%d events kept, want %d", len(events), maxNodeEvents)
	}
	if first, newest := events[0].GetMessage(), events[len(events)-1]; first != "event 3" || newest.GetMessage() != fmt.Sprintf("event %d", maxNodeEvents+2) || newest.GetCreateIndex() != last {
		t.Errorf("events run from %q to %v, want event 3 to event %d at index %d", first, newest, maxNodeEvents+2, last)
	}
}
