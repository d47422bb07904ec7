package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	// submitters is how many jobs are submitted at once.
	submitters = 8
	// retryPause is the backoff between tries of a write the cluster
	// answered Unavailable (an election).
	retryPause = 200 * time.Millisecond
	// stateCheckEvery bounds how long the driver trusts the fleet's view
	// before it reads the servers' state again, for every
	// stateCheckAllocs allocations the run's jobs want running: reading
	// them costs the servers CPU the figures would include, so a run that
	// wants more reads them less often (see stateCheckInterval).
	stateCheckEvery  = 10 * time.Second
	stateCheckAllocs = 100_000
)

// runStep submits the step's jobs, waits for its goal and measures it.
func (r *runner) runStep(ctx context.Context, st Step) (StepReport, error) {
	sr := StepReport{Name: st.Name}
	idx0, err := r.cl.maxIndex(ctx)
	if err != nil {
		return sr, err
	}
	m0, err := r.scrapeAll(ctx)
	if err != nil {
		return sr, err
	}
	fs0, jw0 := r.fleet.Stats(), r.jobWrites.Load()
	r.sampler.setPhase(st.Name)
	start := time.Now()
	if err := r.submit(ctx, st); err != nil {
		return sr, err
	}
	settledAt, err := r.waitGoal(ctx, st, start, idx0)
	if err != nil {
		return sr, fmt.Errorf("loadgen: step %s: %w", st.Name, err)
	}
	sr.StartSeconds = start.Sub(r.began).Seconds()
	sr.Seconds = time.Since(start).Seconds()
	if settledAt > 0 {
		sr.SettledSeconds = time.Unix(0, settledAt).Sub(start).Seconds()
	}
	if err := pause(ctx, st.Hold); err != nil {
		return sr, fmt.Errorf("loadgen: step %s: %w", st.Name, err)
	}
	sr.HeldSeconds = time.Since(start).Seconds()

	idx1, err := r.cl.maxIndex(ctx)
	if err != nil {
		return sr, err
	}
	m1, err := r.scrapeAll(ctx)
	if err != nil {
		return sr, err
	}
	fs1 := r.fleet.Stats()
	sr.RaftEntries = idx1 - idx0
	d := delta(m0, m1)
	sr.RaftBytes, sr.ServerCPUSeconds = d.RaftBytes, d.CPUSeconds
	sr.PlansApplied, sr.PlansPartlyRejected = uint64(d.PlansApplied), uint64(d.PlansRejected)
	sr.PlacementsRelocated = uint64(d.Relocated)
	sr.workers = d.Workers
	for i := range m1 {
		sr.CPUSeconds = append(sr.CPUSeconds, m1[i].CPUSeconds-m0[i].CPUSeconds)
	}
	sr.Writes = fleetWrites(fs1) - fleetWrites(fs0) + r.jobWrites.Load() - jw0
	sr.Heartbeats = fs1.HeartbeatsOK - fs0.HeartbeatsOK
	sr.HeartbeatsPerSecond = float64(sr.Heartbeats) / sr.HeldSeconds
	sr.UpdateAlloc, sr.GetAllocs = latenciesBetween(fs0, fs1)
	if err := r.countWork(ctx, &sr, start, idx0, idx1); err != nil {
		return sr, err
	}
	sr.deriveCosts()
	return sr, nil
}

// fleetWrites counts the writes the servers acknowledged to the fleet:
// registrations and allocation reports.
func fleetWrites(st simagent.Stats) uint64 { return st.Registrations + st.ReportCalls }

// countWork counts the placements and evaluations of the run's jobs that
// the step caused.
func (r *runner) countWork(ctx context.Context, sr *StepReport, start time.Time, idx0, idx1 uint64) error {
	var last int64
	for id := range r.jobs {
		allocs, err := r.cl.jobAllocs(ctx, id)
		if err != nil {
			return err
		}
		for _, a := range allocs {
			if r.placed[a.GetId()] || a.GetCreateTime() < start.UnixNano() {
				continue
			}
			r.placed[a.GetId()] = true
			sr.Placements++
			last = max(last, a.GetCreateTime())
		}
		evals, err := r.cl.jobEvals(ctx, id)
		if err != nil {
			return err
		}
		n, _ := evalsDone(evals, idx0, idx1)
		sr.Evals += n
	}
	if sr.Placements > 0 {
		sr.PlacementsPerSecond = float64(sr.Placements) / time.Unix(0, last).Sub(start).Seconds()
	}
	if sr.Seconds > 0 {
		sr.EvalsPerSecond = float64(sr.Evals) / sr.Seconds
	}
	return nil
}

// submit registers the step's jobs and deregisters its stopped ones.
func (r *runner) submit(ctx context.Context, st Step) error {
	type write struct {
		job  *droverv1.Job
		stop string
	}
	var writes []write
	for _, j := range st.Jobs {
		writes = append(writes, write{job: j.CloneVT()})
		r.jobs[j.GetId()] = j
		delete(r.stopped, j.GetId())
	}
	for _, id := range st.Stop {
		writes = append(writes, write{stop: id})
		r.stopped[id] = true
		if _, ok := r.jobs[id]; !ok {
			r.jobs[id] = &droverv1.Job{Id: id}
		}
	}
	work := make(chan write)
	errs := make(chan error, len(writes))
	var wg sync.WaitGroup
	for range min(submitters, len(writes)) {
		wg.Go(func() {
			for w := range work {
				errs <- r.write(ctx, w.job, w.stop)
			}
		})
	}
	for _, w := range writes {
		work <- w
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// write registers job, or deregisters the job stop names, retrying while
// the cluster answers Unavailable. One request id serves every try.
func (r *runner) write(ctx context.Context, job *droverv1.Job, stop string) error {
	reqID := uuid.NewString()
	for {
		var err error
		if job != nil {
			_, err = r.cl.jobs().Register(ctx, &droverv1.RegisterJobRequest{Job: job, RequestId: reqID})
		} else {
			_, err = r.cl.jobs().Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: stop, RequestId: reqID})
		}
		if status.Code(err) != codes.Unavailable {
			if err != nil {
				return fmt.Errorf("loadgen: submit job %s%s: %w", job.GetId(), stop, err)
			}
			r.jobWrites.Add(1)
			return nil
		}
		if err := pause(ctx, retryPause); err != nil {
			return fmt.Errorf("loadgen: submit job %s%s: %w", job.GetId(), stop, err)
		}
	}
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
