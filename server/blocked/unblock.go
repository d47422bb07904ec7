package blocked

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Unblock releases the evaluations that capacity on a node of
// computedClass, appearing at raft index index, may help: every escaped
// one, and every captured one that did not find that class infeasible
// (an explicit false in its class eligibility). A class it never saw may
// be new, so it is released too. The unblock is recorded for evaluations
// blocked later on an older snapshot.
func (t *Tracker) Unblock(computedClass string, index uint64) {
	t.mu.Lock()
	if !t.enabled {
		t.mu.Unlock()
		return
	}
	if m, ok := t.unblocks[computedClass]; !ok || index >= m.index {
		t.unblocks[computedClass] = unblockMark{index: index, at: t.now()}
	}
	released := make(map[*droverv1.Evaluation]string)
	for id, w := range t.escaped {
		released[w.ev] = w.token
		delete(t.escaped, id)
		delete(t.jobs, w.ev.GetJobId())
	}
	for id, w := range t.captured {
		if eligible, seen := w.ev.GetClassEligibility()[computedClass]; seen && !eligible {
			continue
		}
		released[w.ev] = w.token
		delete(t.captured, id)
		delete(t.jobs, w.ev.GetJobId())
	}
	t.mu.Unlock()

	if len(released) > 0 {
		t.logger.Debug("unblocked evals", "class", computedClass, "index", index, "count", len(released))
	}
	t.release(released)
}
