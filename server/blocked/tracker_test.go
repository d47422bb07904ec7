package blocked

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// fakeBroker records what the tracker releases and, in single-goroutine
// tests, checks that the tracker's lock is free while it does.
type fakeBroker struct {
	t       *testing.T
	tracker *Tracker
	// concurrent turns the lock check off: other callers may hold it.
	concurrent bool

	mu       sync.Mutex
	released map[string]string // eval id -> token
}

func (f *fakeBroker) EnqueueAll(evals map[*droverv1.Evaluation]string) {
	if !f.concurrent {
		if !f.tracker.mu.TryLock() {
			f.t.Error("EnqueueAll called with the tracker's lock held")
		} else {
			f.tracker.mu.Unlock()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for ev, token := range evals {
		f.released[ev.GetId()] = token
	}
}

// take returns the released eval ids, sorted, and forgets them.
func (f *fakeBroker) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.released {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	f.released = map[string]string{}
	return ids
}

func (f *fakeBroker) token(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.released[id]
}

// newTracker returns an enabled tracker with a fake broker.
func newTracker(t *testing.T) (*Tracker, *fakeBroker) {
	t.Helper()
	f := &fakeBroker{t: t, released: map[string]string{}}
	tr := New(f, nil)
	f.tracker = tr
	tr.SetEnabled(true)
	return tr, f
}

// blockedEval builds a blocked evaluation.
func blockedEval(id, job string, opts ...func(*droverv1.Evaluation)) *droverv1.Evaluation {
	e := &droverv1.Evaluation{Id: id, JobId: job, Status: droverv1.EvalStatus_EVAL_STATUS_BLOCKED, Priority: 50}
	for _, o := range opts {
		o(e)
	}
	return e
}

func indexes(create, snapshot uint64) func(*droverv1.Evaluation) {
	return func(e *droverv1.Evaluation) { e.CreateIndex, e.SnapshotIndex = create, snapshot }
}

func classes(m map[string]bool) func(*droverv1.Evaluation) {
	return func(e *droverv1.Evaluation) { e.ClassEligibility = m }
}

func escaped(e *droverv1.Evaluation) { e.EscapedComputedClass = true }

func ids(evals []*droverv1.Evaluation) []string {
	var out []string
	for _, e := range evals {
		out = append(out, e.GetId())
	}
	slices.Sort(out)
	return out
}

func TestOneBlockedEvalPerJob(t *testing.T) {
	tests := []struct {
		name      string
		first     *droverv1.Evaluation
		second    *droverv1.Evaluation
		wantKept  string
		wantDupes []string
	}{
		{
			name:      "newer create index replaces",
			first:     blockedEval("old", "j", indexes(10, 10)),
			second:    blockedEval("new", "j", indexes(20, 20)),
			wantKept:  "new",
			wantDupes: []string{"old"},
		},
		{
			name:      "older arrival loses",
			first:     blockedEval("new", "j", indexes(20, 20)),
			second:    blockedEval("old", "j", indexes(10, 10)),
			wantKept:  "new",
			wantDupes: []string{"old"},
		},
		{
			name:      "snapshot index counts",
			first:     blockedEval("a", "j", indexes(10, 30)),
			second:    blockedEval("b", "j", indexes(20, 20)),
			wantKept:  "a",
			wantDupes: []string{"b"},
		},
		{
			name:      "tie favours the new one",
			first:     blockedEval("a", "j", indexes(10, 20)),
			second:    blockedEval("b", "j", indexes(20, 15)),
			wantKept:  "b",
			wantDupes: []string{"a"},
		},
		{
			name:      "escaped and captured compete too",
			first:     blockedEval("a", "j", indexes(10, 10), escaped),
			second:    blockedEval("b", "j", indexes(20, 20)),
			wantKept:  "b",
			wantDupes: []string{"a"},
		},
		{
			name:     "different jobs are independent",
			first:    blockedEval("a", "j1", indexes(10, 10)),
			second:   blockedEval("b", "j2", indexes(20, 20)),
			wantKept: "a b",
		},
		{
			name:     "the same eval blocked again is no duplicate",
			first:    blockedEval("a", "j", indexes(10, 10)),
			second:   blockedEval("a", "j", indexes(10, 12)),
			wantKept: "a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, f := newTracker(t)
			tr.Block(tt.first)
			tr.Block(tt.second)
			if got := ids(tr.TakeDuplicates()); !slices.Equal(got, tt.wantDupes) {
				t.Fatalf("duplicates %v, want %v", got, tt.wantDupes)
			}
			if got := tr.TakeDuplicates(); got != nil {
				t.Fatalf("duplicates taken twice: %v", ids(got))
			}
			tr.Unblock("any", 100)
			if got := f.take(); strings.Join(got, " ") != tt.wantKept {
				t.Fatalf("released %v, want %q", got, tt.wantKept)
			}
		})
	}
}

func TestClassEligibility(t *testing.T) {
	tests := []struct {
		name        string
		eval        *droverv1.Evaluation
		unblock     string
		wantRelease bool
	}{
		{"eligible class", blockedEval("e", "j", classes(map[string]bool{"c1": true})), "c1", true},
		{"infeasible class", blockedEval("e", "j", classes(map[string]bool{"c1": false})), "c1", false},
		{"class never seen", blockedEval("e", "j", classes(map[string]bool{"c1": false})), "c2", true},
		{"no eligibility recorded", blockedEval("e", "j"), "c1", true},
		{"escaped ignores eligibility", blockedEval("e", "j", escaped, classes(map[string]bool{"c1": false})), "c1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, f := newTracker(t)
			tr.Block(tt.eval)
			tr.Unblock(tt.unblock, 10)
			released := len(f.take()) == 1
			if released != tt.wantRelease {
				t.Fatalf("released = %v, want %v", released, tt.wantRelease)
			}
			wantBlocked := 1
			if released {
				wantBlocked = 0
			}
			if s := tr.Stats(); s.Blocked != wantBlocked {
				t.Fatalf("stats %+v, want %d blocked", s, wantBlocked)
			}
		})
	}
}

func TestEscapedReleasedByAnyUnblock(t *testing.T) {
	tr, f := newTracker(t)
	tr.Block(blockedEval("esc", "j1", escaped))
	tr.Block(blockedEval("cap", "j2", classes(map[string]bool{"c1": false, "c2": true})))
	if s := tr.Stats(); s != (Stats{Blocked: 2, Escaped: 1}) {
		t.Fatalf("stats %+v", s)
	}
	tr.Unblock("c1", 10)
	if got := f.take(); !slices.Equal(got, []string{"esc"}) {
		t.Fatalf("released %v, want esc", got)
	}
	if s := tr.Stats(); s != (Stats{Blocked: 1}) {
		t.Fatalf("stats %+v", s)
	}
	tr.Unblock("c2", 11)
	if got := f.take(); !slices.Equal(got, []string{"cap"}) {
		t.Fatalf("released %v, want cap", got)
	}
}

func TestMissedUnblock(t *testing.T) {
	tests := []struct {
		name     string
		unblocks map[string]uint64
		eval     *droverv1.Evaluation
		wantNow  bool
	}{
		{
			name:     "no unblock recorded",
			unblocks: nil,
			eval:     blockedEval("e", "j", indexes(5, 5)),
		},
		{
			name:     "eligible class unblocked after the snapshot",
			unblocks: map[string]uint64{"c1": 10},
			eval:     blockedEval("e", "j", indexes(5, 5), classes(map[string]bool{"c1": true})),
			wantNow:  true,
		},
		{
			name:     "unblock before the snapshot",
			unblocks: map[string]uint64{"c1": 10},
			eval:     blockedEval("e", "j", indexes(12, 12), classes(map[string]bool{"c1": true})),
		},
		{
			name:     "unblock at the snapshot index was seen",
			unblocks: map[string]uint64{"c1": 10},
			eval:     blockedEval("e", "j", indexes(10, 10), classes(map[string]bool{"c1": true})),
		},
		{
			name:     "infeasible class unblocked after the snapshot",
			unblocks: map[string]uint64{"c1": 10},
			eval:     blockedEval("e", "j", indexes(5, 5), classes(map[string]bool{"c1": false})),
		},
		{
			name:     "class unseen by the scheduler",
			unblocks: map[string]uint64{"new": 10},
			eval:     blockedEval("e", "j", indexes(5, 5), classes(map[string]bool{"c1": false})),
			wantNow:  true,
		},
		{
			name:     "escaped, any class after the snapshot",
			unblocks: map[string]uint64{"c1": 4, "c2": 10},
			eval:     blockedEval("e", "j", indexes(5, 5), escaped, classes(map[string]bool{"c1": false, "c2": false})),
			wantNow:  true,
		},
		{
			name:     "escaped, all before the snapshot",
			unblocks: map[string]uint64{"c1": 4},
			eval:     blockedEval("e", "j", indexes(5, 5), escaped),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, f := newTracker(t)
			for class, index := range tt.unblocks {
				tr.Unblock(class, index)
			}
			tr.Block(tt.eval)
			gotNow := len(f.take()) == 1
			if gotNow != tt.wantNow {
				t.Fatalf("released at once = %v, want %v", gotNow, tt.wantNow)
			}
			wantBlocked := 1
			if gotNow {
				wantBlocked = 0
			}
			if s := tr.Stats(); s.Blocked != wantBlocked {
				t.Fatalf("stats %+v, want %d blocked", s, wantBlocked)
			}
		})
	}
}

func TestReblockCarriesToken(t *testing.T) {
	tr, f := newTracker(t)

	// Written through raft first (no token), then reblocked by its worker.
	e := blockedEval("e", "j", indexes(10, 10))
	tr.Block(e)
	tr.Reblock(e, "tok")
	if d := tr.TakeDuplicates(); d != nil {
		t.Fatalf("reblock made duplicates %v", ids(d))
	}
	// A later write of the same eval without a token keeps it.
	tr.Block(e)
	tr.Unblock("c1", 20)
	if got := f.token("e"); got != "tok" {
		t.Fatalf("released with token %q, want tok", got)
	}
	f.take()

	// Missed unblock: released at once, with the token.
	tr.Reblock(blockedEval("m", "j2", indexes(15, 15)), "tok2")
	if got := f.token("m"); got != "tok2" {
		t.Fatalf("missed-unblock release with token %q, want tok2", got)
	}
}

func TestUntrack(t *testing.T) {
	tr, f := newTracker(t)
	tr.Block(blockedEval("a", "j1"))
	tr.Block(blockedEval("b", "j2", escaped))
	tr.Untrack("j1")
	tr.Untrack("j2")
	tr.Untrack("unknown")
	if s := tr.Stats(); s != (Stats{}) {
		t.Fatalf("stats %+v, want empty", s)
	}
	tr.Unblock("c1", 10)
	if got := f.take(); got != nil {
		t.Fatalf("released %v after untrack", got)
	}
	// A new blocked eval of the job is tracked afresh, not a duplicate.
	tr.Block(blockedEval("a2", "j1", indexes(20, 20)))
	if d := tr.TakeDuplicates(); d != nil {
		t.Fatalf("duplicates %v", ids(d))
	}
	if s := tr.Stats(); s.Blocked != 1 {
		t.Fatalf("stats %+v, want 1 blocked", s)
	}
}

func TestDisableFlushes(t *testing.T) {
	tr, f := newTracker(t)
	tr.Unblock("c1", 10)
	tr.Block(blockedEval("a", "j1", indexes(20, 20)))
	tr.Block(blockedEval("b", "j1", indexes(30, 30)))
	tr.Block(blockedEval("c", "j2", indexes(20, 20), escaped))

	tr.SetEnabled(false)
	if s := tr.Stats(); s != (Stats{}) {
		t.Fatalf("stats %+v, want empty", s)
	}
	if d := tr.TakeDuplicates(); d != nil {
		t.Fatalf("duplicates survived: %v", ids(d))
	}
	// Ignored while disabled.
	tr.Block(blockedEval("d", "j3"))
	tr.Unblock("c1", 40)
	tr.Untrack("j3")
	if s := tr.Stats(); s != (Stats{}) {
		t.Fatalf("stats while disabled %+v", s)
	}

	// Re-enabled: the recorded unblocks are gone, so an old snapshot is
	// tracked rather than released.
	tr.SetEnabled(true)
	tr.Block(blockedEval("e", "j4", indexes(5, 5)))
	if got := f.take(); got != nil {
		t.Fatalf("released %v", got)
	}
	if s := tr.Stats(); s.Blocked != 1 {
		t.Fatalf("stats %+v, want 1 blocked", s)
	}
}

func TestPrune(t *testing.T) {
	tr, f := newTracker(t)
	now := time.Unix(1_000_000, 0)
	tr.now = func() time.Time { return now }

	tr.Unblock("old", 10)
	now = now.Add(PruneAge + time.Minute)
	tr.Unblock("recent", 3)
	tr.Prune()

	// Only "old" (index 10) would have released a snapshot at 5.
	tr.Block(blockedEval("e", "j", indexes(5, 5)))
	if got := f.take(); got != nil {
		t.Fatalf("released %v after prune", got)
	}
	// "recent" survived the prune.
	tr.Block(blockedEval("e2", "j2", indexes(2, 2)))
	if got := f.take(); !slices.Equal(got, []string{"e2"}) {
		t.Fatalf("released %v, want e2", got)
	}
}

// FSM appliers and reblocking workers call in at once.
func TestConcurrentUse(t *testing.T) {
	tr, f := newTracker(t)
	f.concurrent = true
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				id := string(rune('a'+g)) + "-" + string(rune('a'+i%26))
				tr.Reblock(blockedEval(id, id, indexes(uint64(i), uint64(i))), "tok")
				tr.Unblock("c", uint64(i))
				tr.Untrack(id)
				tr.TakeDuplicates()
				tr.Stats()
			}
		})
	}
	wg.Wait()
	tr.Unblock("c", 1000)
	f.take()
	if s := tr.Stats(); s != (Stats{}) {
		t.Fatalf("stats %+v, want empty", s)
	}
}
