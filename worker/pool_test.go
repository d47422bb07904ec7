package worker

import (
	"context"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

func TestSetConfigGrowsAndShrinks(t *testing.T) {
	h := newHarness(t, Config{NumWorkers: 1}, 10)
	release := make(chan struct{})
	h.scheds.script("busy", func(context.Context, *droverv1.Evaluation, scheduler.State, scheduler.Planner) error {
		<-release
		return nil
	})
	h.start()
	h.push(eval("busy", "job1", 5), 0)
	recv(t, h.scheds.started, "process of busy")

	service := []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE}
	if err := h.pool.SetConfig(3, service); err != nil {
		t.Fatal(err)
	}
	h.waitFor("3 workers", func() bool { return len(h.pool.Workers()) == 3 })
	if num, sched, _ := h.pool.Config(); num != 3 || !slices.Equal(sched, service) {
		t.Errorf("Config() = %d %v, want 3 %v", num, sched, service)
	}
	h.waitFor("a dequeue of service evals only", func() bool {
		return slices.Equal(h.broker.lastSchedulers(), service)
	})

	// Shrink to none: idle workers exit, the busy one finishes first.
	if err := h.pool.SetConfig(0, service); err != nil {
		t.Fatal(err)
	}
	h.waitFor("only the busy worker left, stopping", func() bool {
		w := h.pool.Workers()
		return len(w) == 1 && w[0].EvalID == "busy" && w[0].Status == StatusStopping
	})
	close(release)
	recv(t, h.broker.acks, "ack of busy")
	h.waitFor("no workers", func() bool { return len(h.pool.Workers()) == 0 })

	// Grow again: new workers process evals.
	if err := h.pool.SetConfig(2, service); err != nil {
		t.Fatal(err)
	}
	h.push(eval("e2", "job2", 5), 0)
	if got := recv(t, h.broker.acks, "ack of e2"); got != "e2" {
		t.Fatalf("acked %q, want e2", got)
	}
	h.waitFor("2 workers", func() bool { return len(h.pool.Workers()) == 2 })
	ids := map[string]bool{}
	for _, w := range h.pool.Workers() {
		ids[w.ID] = true
	}
	if len(ids) != 2 || ids["worker-1"] {
		t.Errorf("worker ids %v: want two new, unique ids", ids)
	}
}

func TestSetConfigBeforeStart(t *testing.T) {
	h := newHarness(t, Config{NumWorkers: 1}, 10)
	if err := h.pool.SetConfig(2, []droverv1.JobType{droverv1.JobType_JOB_TYPE_BATCH}); err != nil {
		t.Fatal(err)
	}
	if w := h.pool.Workers(); len(w) != 0 {
		t.Fatalf("workers before Start: %+v", w)
	}
	h.start()
	h.waitFor("2 workers", func() bool { return len(h.pool.Workers()) == 2 })
}

func TestWorkersStartPausedWhilePoolPaused(t *testing.T) {
	h := newHarness(t, Config{NumWorkers: 1}, 10)
	h.pool.Pause()
	h.start()
	if err := h.pool.SetConfig(2, defaultSchedulers()); err != nil {
		t.Fatal(err)
	}
	h.waitFor("2 paused workers", func() bool {
		w := h.pool.Workers()
		return len(w) == 2 && w[0].Status == StatusPaused && w[1].Status == StatusPaused
	})
	h.pool.Resume()
	h.push(eval("e1", "job1", 5), 0)
	recv(t, h.broker.acks, "ack after resume")
}

func TestLeaderPausedWorkers(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 3, 8: 6, 256: 192} {
		if got := LeaderPausedWorkers(n); got != want {
			t.Errorf("LeaderPausedWorkers(%d) = %d, want %d", n, got, want)
		}
	}
}

// statuses counts the pool's workers by status.
func statuses(p *Pool) map[Status]int {
	out := make(map[Status]int)
	for _, w := range p.Workers() {
		out[w.Status]++
	}
	return out
}

func TestLeaderParksThreeQuartersOfWorkers(t *testing.T) {
	h := newHarness(t, Config{NumWorkers: 4}, 10)
	h.start()
	h.waitFor("4 workers dequeuing", func() bool { return statuses(h.pool)[StatusRunning] == 4 })

	h.pool.SetLeader(true)
	h.waitFor("3 of 4 parked on the leader", func() bool {
		s := statuses(h.pool)
		return s[StatusPaused] == 3 && s[StatusRunning] == 1
	})
	if _, _, paused := h.pool.Config(); paused {
		t.Error("the leader's share of parked workers reported as an operator pause")
	}
	// The one left still processes evaluations.
	h.push(eval("e1", "job1", 5), 0)
	recv(t, h.broker.acks, "ack of e1 on the leader")

	if err := h.pool.SetConfig(8, defaultSchedulers()); err != nil {
		t.Fatal(err)
	}
	h.waitFor("6 of 8 parked after growing", func() bool {
		s := statuses(h.pool)
		return s[StatusPaused] == 6 && s[StatusRunning] == 2
	})

	// An operator pause parks all; resuming it gives back the leader's share.
	h.pool.Pause()
	h.waitFor("all 8 parked", func() bool { return statuses(h.pool)[StatusPaused] == 8 })
	h.pool.Resume()
	h.waitFor("6 of 8 parked after the operator resumed", func() bool {
		s := statuses(h.pool)
		return s[StatusPaused] == 6 && s[StatusRunning] == 2
	})

	h.pool.SetLeader(false)
	h.waitFor("all 8 dequeuing after losing leadership", func() bool { return statuses(h.pool)[StatusRunning] == 8 })
}
