package droverv1

// Terminal reports whether the evaluation has finished: complete, failed
// or canceled. Pending and blocked evaluations still have work to do.
func (e *Evaluation) Terminal() bool {
	switch e.GetStatus() {
	case EvalStatus_EVAL_STATUS_COMPLETE, EvalStatus_EVAL_STATUS_FAILED, EvalStatus_EVAL_STATUS_CANCELED:
		return true
	}
	return false
}
