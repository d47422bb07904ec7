package scheduler

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestNeedsReconnectAndUnknownSince(t *testing.T) {
	m := int64(time.Minute)
	other := &droverv1.AllocState{Field: droverv1.AllocStateField_ALLOC_STATE_FIELD_UNSPECIFIED, Time: 9}
	cases := []struct {
		name         string
		states       []*droverv1.AllocState
		needs        bool
		unknownSince int64
	}{
		{"no entries", nil, false, 0},
		{"unknown", []*droverv1.AllocState{stateAt(csUnknown, 1*m)}, true, 1 * m},
		{"reconnected", []*droverv1.AllocState{stateAt(csUnknown, 1*m), stateAt(csRunning, 2*m)}, false, 0},
		{"disconnected again", []*droverv1.AllocState{
			stateAt(csUnknown, 1*m), stateAt(csRunning, 2*m), stateAt(csUnknown, 3*m),
		}, true, 3 * m},
		{"repeated unknown keeps the first of the run", []*droverv1.AllocState{
			stateAt(csUnknown, 3*m), stateAt(csUnknown, 4*m),
		}, true, 3 * m},
		{"other fields skipped", []*droverv1.AllocState{stateAt(csUnknown, 1*m), other}, true, 1 * m},
		{"lost", []*droverv1.AllocState{stateAt(csUnknown, 1*m), stateAt(csLost, 2*m)}, false, 0},
	}
	for _, tc := range cases {
		a := &droverv1.Allocation{AllocStates: tc.states}
		if got := needsReconnect(a); got != tc.needs {
			t.Errorf("%s: needsReconnect = %v, want %v", tc.name, got, tc.needs)
		}
		if got := a.UnknownSince(); got != tc.unknownSince {
			t.Errorf("%s: UnknownSince = %d, want %d", tc.name, got, tc.unknownSince)
		}
	}
}

func TestDisconnectExpired(t *testing.T) {
	group := &droverv1.TaskGroup{MaxClientDisconnect: durationpb.New(10 * time.Minute)}
	unknownSince := func(d time.Duration, followup string) *droverv1.Allocation {
		return &droverv1.Allocation{
			ClientStatus: csUnknown, FollowupEvalId: followup,
			AllocStates: []*droverv1.AllocState{stateAt(csUnknown, rcNow-int64(d))},
		}
	}
	cases := []struct {
		name  string
		alloc *droverv1.Allocation
		group *droverv1.TaskGroup
		want  bool
	}{
		{"within the window", unknownSince(time.Minute, ""), group, false},
		{"window over", unknownSince(10*time.Minute, ""), group, true},
		{"this eval is its follow-up", unknownSince(time.Minute, rcEval), group, true},
		{"another eval's follow-up", unknownSince(time.Minute, "other"), group, false},
		{"not unknown", &droverv1.Allocation{ClientStatus: csRunning, FollowupEvalId: rcEval}, group, false},
		{"group without a window", unknownSince(time.Hour, ""), &droverv1.TaskGroup{}, false},
	}
	for _, tc := range cases {
		if got := disconnectExpired(tc.alloc, tc.group, rcNow, rcEval); got != tc.want {
			t.Errorf("%s: expired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPickReconnect(t *testing.T) {
	alloc := func(version uint64, status droverv1.AllocClientStatus, score float64, created int64) *droverv1.Allocation {
		return &droverv1.Allocation{JobVersion: version, ClientStatus: status, Score: score, CreateTime: created}
	}
	best := droverv1.ReconnectStrategy_RECONNECT_STRATEGY_BEST_SCORE
	cases := []struct {
		name       string
		orig, repl *droverv1.Allocation
		strategy   droverv1.ReconnectStrategy
		wantOrig   bool
	}{
		{"newer replacement beats keep original", alloc(1, csRunning, 1, 1), alloc(2, csRunning, 0, 2),
			droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_ORIGINAL, false},
		{"newer original beats keep replacement", alloc(3, csRunning, 0, 1), alloc(2, csRunning, 1, 2),
			droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_REPLACEMENT, true},
		{"keep original", alloc(1, csRunning, 0, 1), alloc(1, csRunning, 1, 2), droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_ORIGINAL, true},
		{"keep replacement", alloc(1, csRunning, 1, 1), alloc(1, csRunning, 0, 2), droverv1.ReconnectStrategy_RECONNECT_STRATEGY_KEEP_REPLACEMENT, false},
		{"longest running: original", alloc(1, csRunning, 0, 1), alloc(1, csRunning, 1, 2), droverv1.ReconnectStrategy_RECONNECT_STRATEGY_LONGEST_RUNNING, true},
		{"longest running: replacement", alloc(1, csRunning, 0, 3), alloc(1, csRunning, 0, 2), droverv1.ReconnectStrategy_RECONNECT_STRATEGY_LONGEST_RUNNING, false},
		{"best score: higher replacement", alloc(1, csRunning, 0.2, 1), alloc(1, csRunning, 0.8, 2), best, false},
		{"best score: tie keeps original", alloc(1, csRunning, 0.5, 1), alloc(1, csRunning, 0.5, 2), best, true},
		{"best score: pending replacement does not replace running original", alloc(1, csRunning, 0.2, 1), alloc(1, csPending, 0.8, 2), best, true},
		{"best score: both pending", alloc(1, csPending, 0.2, 1), alloc(1, csPending, 0.8, 2), best, false},
		{"unspecified is best score", alloc(1, csRunning, 0.2, 1), alloc(1, csRunning, 0.8, 2), droverv1.ReconnectStrategy_RECONNECT_STRATEGY_UNSPECIFIED, false},
	}
	for _, tc := range cases {
		got := pickReconnect(tc.orig, tc.repl, tc.strategy)
		if (got == tc.orig) != tc.wantOrig {
			t.Errorf("%s: kept original = %v, want %v", tc.name, got == tc.orig, tc.wantOrig)
		}
	}
}
