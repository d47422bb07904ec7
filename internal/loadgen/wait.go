package loadgen

import (
	"context"
	"fmt"
	"math"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// waitGoal waits until the step reached its goal and returns when (unix ns)
// the last allocation change it needed was committed; zero when the step
// did not wait for allocations.
func (r *runner) waitGoal(ctx context.Context, st Step, start time.Time, idx0 uint64) (int64, error) {
	ids := stepJobIDs(st)
	if len(ids) == 0 {
		return 0, nil
	}
	var (
		lastCheck time.Time
		settled   int64
		where     string
	)
	err := poll(ctx, func() (bool, error) {
		if st.WaitRunning && !r.fleetSuggestsDone() && time.Since(lastCheck) < stateCheckInterval(r.runningWanted()) {
			return false, nil
		}
		lastCheck = time.Now()
		var (
			done bool
			err  error
		)
		if st.WaitRunning {
			done, settled, where, err = r.allocsReached(ctx, ids, start)
		} else {
			done, where, err = r.evalsFinished(ctx, ids, idx0)
		}
		return done, err
	}, func() error { return fmt.Errorf("goal not reached: %s", where) })
	return settled, err
}

// stepJobIDs are the ids of the jobs a step registers or stops.
func stepJobIDs(st Step) []string {
	ids := make([]string, 0, len(st.Jobs)+len(st.Stop))
	for _, j := range st.Jobs {
		ids = append(ids, j.GetId())
	}
	return append(ids, st.Stop...)
}

// stateCheckInterval is how long the driver trusts the fleet's view of a
// run whose jobs want that many allocations running: stateCheckEvery for
// every stateCheckAllocs of them begun. A full C1M reads its million
// allocations every 100 s rather than every 10 s (a profile of its driver
// put 8% of the driver's CPU in those reads). How often the driver looks does not move the
// figures, which come from the commit times in the state it reads.
func stateCheckInterval(want int) time.Duration {
	return stateCheckEvery * time.Duration(max(1, (want+stateCheckAllocs-1)/stateCheckAllocs))
}

// runningWanted counts the allocations the run's service jobs want
// running.
func (r *runner) runningWanted() int {
	want := 0
	for id, j := range r.jobs {
		if r.stopped[id] || j.GetType() == droverv1.JobType_JOB_TYPE_BATCH {
			continue
		}
		for _, tg := range j.GetTaskGroups() {
			want += int(tg.GetCount())
		}
	}
	return want
}

// fleetSuggestsDone compares what the agents run with what the run's jobs
// want, which costs the servers nothing: when they agree, the servers'
// state is worth reading.
func (r *runner) fleetSuggestsDone() bool {
	st := r.fleet.Stats().AllocStatuses
	return st[droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING] == 0 &&
		st[droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING] == r.runningWanted()
}

// allocsReached reads the jobs' allocations and reports whether every job
// reached its goal, when the last change was committed, and how far they
// are.
func (r *runner) allocsReached(ctx context.Context, ids []string, start time.Time) (bool, int64, string, error) {
	var sum jobProgress
	done := true
	for _, id := range ids {
		allocs, err := r.cl.jobAllocs(ctx, id)
		if err != nil {
			return false, 0, "", err
		}
		p := progressOf(r.jobs[id], r.stopped[id], allocs, start.UnixNano())
		done = done && p.done()
		sum.Wanted += p.Wanted
		sum.Reached += p.Reached
		sum.Lingering += p.Lingering
		sum.SettledAt = max(sum.SettledAt, p.SettledAt)
	}
	where := fmt.Sprintf("%d of %d allocations in their goal status, %d to stop still running", sum.Reached, sum.Wanted, sum.Lingering)
	return done, sum.SettledAt, where, nil
}

// evalsFinished reports whether every job has an evaluation created after
// idx0 and none of them is pending.
func (r *runner) evalsFinished(ctx context.Context, ids []string, idx0 uint64) (bool, string, error) {
	waiting := 0
	for _, id := range ids {
		evals, err := r.cl.jobEvals(ctx, id)
		if err != nil {
			return false, "", err
		}
		n, pending := evalsDone(evals, idx0, math.MaxUint64)
		if pending || n == 0 && !anyEvalAfter(evals, idx0) {
			waiting++
		}
	}
	return waiting == 0, fmt.Sprintf("%d of %d jobs with evaluations pending", waiting, len(ids)), nil
}

// anyEvalAfter reports whether an evaluation was created after idx.
func anyEvalAfter(evals []*droverv1.Evaluation, idx uint64) bool {
	for _, e := range evals {
		if e.GetCreateIndex() > idx {
			return true
		}
	}
	return false
}
