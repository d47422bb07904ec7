package cli

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestEnumName(t *testing.T) {
	tests := []struct {
		value protoreflect.Enum
		want  string
	}{
		{droverv1.JobType_JOB_TYPE_SERVICE, "service"},
		{droverv1.JobType_JOB_TYPE_UNSPECIFIED, "unspecified"},
		{droverv1.EvalStatus_EVAL_STATUS_COMPLETE, "complete"},
		{droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, "job-register"},
		{droverv1.EvalTrigger_EVAL_TRIGGER_MAX_DISCONNECT_TIMEOUT, "max-disconnect-timeout"},
		{droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, "running"},
		{droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, "run"},
		{droverv1.JobStatus_JOB_STATUS_DEAD, "dead"},
		{droverv1.RaftState_RAFT_STATE_LEADER, "leader"},
		{droverv1.JobType(42), "42"}, // from a newer server
	}
	for _, tt := range tests {
		if got := enumName(tt.value); got != tt.want {
			t.Errorf("enumName(%v) = %q, want %q", tt.value, got, tt.want)
		}
	}
}

func TestFormatAgo(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	tests := []struct {
		name string
		ns   int64
		want string
	}{
		{"unset", 0, "<none>"},
		{"now", at(0), "0s ago"},
		{"seconds", at(42*time.Second + 900*time.Millisecond), "42s ago"},
		{"minutes", at(4*time.Minute + 12*time.Second), "4m12s ago"},
		{"hours", at(3*time.Hour + 7*time.Minute + 30*time.Second), "3h7m ago"},
		{"days", at(50 * time.Hour), "2d2h ago"},
		{"a week or more", at(7 * 24 * time.Hour), formatTime(at(7 * 24 * time.Hour))},
		{"in the future", at(-time.Minute), formatTime(at(-time.Minute))},
	}
	for _, tt := range tests {
		if got := formatAgo(tt.ns, now); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestSmallFormatters(t *testing.T) {
	tests := []struct{ got, want string }{
		{shortID("3f2a1b4c-9d8e-4f70-a6b5-c4d3e2f10987"), "3f2a1b4c"},
		{shortID("web"), "web"},
		{plural(1, "node"), "1 node"},
		{plural(0, "node"), "0 nodes"},
		{plural(3, "allocation"), "3 allocations"},
		{orNone(""), "<none>"},
		{orDash(""), "-"},
		{formatTime(0), "<none>"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: %q, want %q", i, tt.got, tt.want)
		}
	}
}

func TestPrintFields(t *testing.T) {
	var buf bytes.Buffer
	if err := printFields(&buf, []field{{"ID", "web"}, {"Submit Date", "<none>"}}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ID          = web\n" +
		"Submit Date = <none>\n"
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}
