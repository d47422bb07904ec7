package broker

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Stats counts the evaluations the broker holds, by where they are.
type Stats struct {
	// Ready waits for a worker (failed queue excluded).
	Ready int
	// Unacked is out with a worker or the failed-eval reaper.
	Unacked int
	// Pending waits behind its job's current evaluation.
	Pending int
	// Delayed is held until a time: wait_until in the future, or the
	// redelivery delay after a nack.
	Delayed int
	// Cancelable was made redundant by a newer evaluation of its job and
	// waits for Cancelable to collect it.
	Cancelable int
	// Failed reached the delivery limit and waits for DequeueFailed.
	Failed int
	// ByScheduler splits Ready and Unacked by scheduler type (failed
	// queue excluded).
	ByScheduler map[droverv1.JobType]SchedulerStats
}

// SchedulerStats counts one scheduler type's evaluations.
type SchedulerStats struct {
	Ready, Unacked int
}

// Stats returns a snapshot of the broker's counts.
func (b *Broker) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Stats{
		Unacked:     len(b.unack),
		Pending:     b.pendingCount,
		Delayed:     b.delayed.len(),
		Cancelable:  len(b.cancelable),
		ByScheduler: make(map[droverv1.JobType]SchedulerStats),
	}
	for q, r := range b.ready {
		if q == failedQueue {
			s.Failed = r.len()
			continue
		}
		s.Ready += r.len()
		if r.len() > 0 {
			st := s.ByScheduler[droverv1.JobType(q)]
			st.Ready = r.len()
			s.ByScheduler[droverv1.JobType(q)] = st
		}
	}
	for q, n := range b.unackedBy {
		if q == failedQueue || n == 0 {
			continue
		}
		st := s.ByScheduler[droverv1.JobType(q)]
		st.Unacked = n
		s.ByScheduler[droverv1.JobType(q)] = st
	}
	return s
}

// Cancelable removes and returns up to max evaluations made redundant by
// a newer evaluation of their job, oldest first. The leader marks them
// canceled through raft in batches of this size, so a storm of updates to
// one job never turns into one huge raft entry.
func (b *Broker) Cancelable(max int) []*droverv1.Evaluation {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(max, len(b.cancelable))
	if n <= 0 {
		return nil
	}
	out := make([]*droverv1.Evaluation, n)
	copy(out, b.cancelable)
	clear(b.cancelable[:n])
	b.cancelable = b.cancelable[n:]
	for _, ev := range out {
		delete(b.evals, ev.GetId())
	}
	return out
}
