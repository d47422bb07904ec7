package worker

import "time"

// Status is what a worker is doing.
type Status string

// Worker statuses.
const (
	StatusStarting Status = "starting"
	// StatusRunning: waiting for an evaluation from the broker.
	StatusRunning Status = "running"
	// StatusWaitingForState: waiting for the local state to reach an
	// evaluation's wait index or a plan's refresh index, or, after
	// nacking, for it to catch up.
	StatusWaitingForState Status = "waiting_for_state"
	StatusScheduling      Status = "scheduling"
	// StatusSubmitting: a plan is with the leader. (After a partial
	// commit the worker waits for the refreshed state in
	// StatusWaitingForState, and between retries it is in StatusBackoff.)
	StatusSubmitting Status = "submitting"
	// StatusBackoff: waiting after an error before trying again.
	StatusBackoff Status = "backoff"
	// StatusPaused: parked by Pause before its next dequeue.
	StatusPaused Status = "paused"
	// StatusStopping: told to stop; it finishes its current evaluation.
	StatusStopping Status = "stopping"
	StatusStopped  Status = "stopped"
)

// WorkerInfo is a worker as the operator API shows it.
type WorkerInfo struct {
	ID     string
	Status Status
	// EvalID and JobID name the evaluation in hand, if any.
	EvalID string
	JobID  string
	// Started is when the worker started.
	Started time.Time
	// Processed counts evaluations processed and acked; Nacked those handed
	// back.
	Processed uint64
	Nacked    uint64
}
