package droverv1

import "testing"

func TestEvaluationTerminalAndJobFinished(t *testing.T) {
	for status, want := range map[EvalStatus]bool{
		EvalStatus_EVAL_STATUS_PENDING: false, EvalStatus_EVAL_STATUS_BLOCKED: false,
		EvalStatus_EVAL_STATUS_COMPLETE: true, EvalStatus_EVAL_STATUS_FAILED: true, EvalStatus_EVAL_STATUS_CANCELED: true,
	} {
		if got := (&Evaluation{Status: status}).Terminal(); got != want {
			t.Errorf("evaluation %s: Terminal() = %t, want %t", status, got, want)
		}
	}
	if (*Evaluation)(nil).Terminal() {
		t.Error("a missing evaluation is terminal")
	}
	for _, tc := range []struct {
		job  *Job
		want bool
	}{
		{&Job{Type: JobType_JOB_TYPE_SERVICE, Status: JobStatus_JOB_STATUS_DEAD}, false},
		{&Job{Type: JobType_JOB_TYPE_SERVICE, Stop: true}, true},
		{&Job{Type: JobType_JOB_TYPE_BATCH, Status: JobStatus_JOB_STATUS_RUNNING}, false},
		{&Job{Type: JobType_JOB_TYPE_BATCH, Status: JobStatus_JOB_STATUS_DEAD}, true},
	} {
		if got := tc.job.Finished(); got != tc.want {
			t.Errorf("job %v: Finished() = %t, want %t", tc.job, got, tc.want)
		}
	}
}
