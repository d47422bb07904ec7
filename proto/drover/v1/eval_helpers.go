package droverv1

// IsTerminal reports whether an evaluation with status s needs no more
// work: complete, failed or canceled.
func (s EvalStatus) IsTerminal() bool {
	switch s {
	case EvalStatus_EVAL_STATUS_COMPLETE, EvalStatus_EVAL_STATUS_FAILED, EvalStatus_EVAL_STATUS_CANCELED:
		return true
	}
	return false
}
