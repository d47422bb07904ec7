package worker

// Bookkeeping of a worker's status, for the operator API.

import droverv1 "github.com/droverhq/drover/proto/drover/v1"

// exit marks the worker stopped and tells the pool.
func (w *worker) exit() {
	w.retire()
	w.mu.Lock()
	w.status, w.evalID, w.jobID = StatusStopped, "", ""
	w.mu.Unlock()
	w.pool.exited(w)
	w.pool.notify()
}

// markStopping tells the worker to exit after its current evaluation.
func (w *worker) markStopping() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.retire()
	w.pool.notify()
}

func (w *worker) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

func (w *worker) setStatus(s Status) {
	w.mu.Lock()
	w.status = s
	w.mu.Unlock()
	w.pool.notify()
}

// setEval records the evaluation in hand (nil: none).
func (w *worker) setEval(ev *droverv1.Evaluation) {
	w.mu.Lock()
	w.evalID, w.jobID = ev.GetId(), ev.GetJobId()
	w.mu.Unlock()
}

func (w *worker) info() WorkerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	status := w.status
	if w.stopping && status != StatusStopped {
		status = StatusStopping
	}
	return WorkerInfo{
		ID:        w.id,
		Status:    status,
		EvalID:    w.evalID,
		JobID:     w.jobID,
		Started:   w.started,
		Processed: w.acked,
		Nacked:    w.nacked,
	}
}
