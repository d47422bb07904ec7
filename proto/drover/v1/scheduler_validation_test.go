package droverv1

import (
	"strings"
	"testing"
)

// TestSubmitPlanEvalUpdate checks what a plan may carry as its
// evaluation's outcome: only the completion of its own evaluation.
func TestSubmitPlanEvalUpdate(t *testing.T) {
	const (
		evalID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
		other  = "9b2f1c3e-5d4a-4b6e-8f7a-1c2d3e4f5a6b"
		token  = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	)
	complete := func(edit func(*Evaluation)) *Evaluation {
		ev := &Evaluation{Id: evalID, JobId: "web", Type: JobType_JOB_TYPE_SERVICE, Status: EvalStatus_EVAL_STATUS_COMPLETE}
		if edit != nil {
			edit(ev)
		}
		return ev
	}
	cases := []struct {
		name string
		ev   *Evaluation
		want string // a field the error names; empty: valid
	}{
		{name: "none"},
		{name: "its evaluation complete", ev: complete(nil)},
		{name: "another evaluation", ev: complete(func(ev *Evaluation) { ev.Id = other }), want: "plan.eval_update.id"},
		{name: "another job", ev: complete(func(ev *Evaluation) { ev.JobId = "db" }), want: "plan.eval_update.job_id"},
		{name: "blocked", ev: complete(func(ev *Evaluation) { ev.Status = EvalStatus_EVAL_STATUS_BLOCKED }), want: "plan.eval_update.status"},
		{name: "failed", ev: complete(func(ev *Evaluation) { ev.Status = EvalStatus_EVAL_STATUS_FAILED }), want: "plan.eval_update.status"},
		{name: "no type", ev: complete(func(ev *Evaluation) { ev.Type = JobType_JOB_TYPE_UNSPECIFIED }), want: "plan.eval_update.type"},
		{name: "bad id", ev: complete(func(ev *Evaluation) { ev.Id = "x" }), want: "plan.eval_update.id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &SubmitPlanRequest{Plan: &Plan{EvalId: evalID, EvalToken: token, JobId: "web", EvalUpdate: tc.ev}}
			err := req.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
