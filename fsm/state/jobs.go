package state

import (
	"fmt"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// JobRequestRetention is how long the result of a job write that carried a
// request id is kept. A retry with the same request id within it gets the
// first result and applies nothing; after it the request id is forgotten.
// Results are dropped by later job writes, measured in the entries' own
// times, so every server drops the same results at the same index.
const JobRequestRetention = 15 * time.Minute

// UpsertJob applies a JobRegisterEntry: the job and the evaluation
// that schedules it, in one transaction. A changed specification becomes a
// new version; an unchanged one leaves the job as it is and only adds the
// evaluation.
//
// If the entry carries a request id already applied within
// JobRequestRetention, nothing is written and the stored result of the
// first application is returned. Otherwise the result describes this
// application (it is built even without a request id) and, with a request
// id, is stored for later retries. The result is shared with the store:
// callers must not modify it.
func (s *StateStore) UpsertJob(index uint64, e *droverv1.JobRegisterEntry) (*droverv1.JobRequestResult, []Change, error) {
	var res *droverv1.JobRequestResult
	changes, err := s.write(index, func(tx *txn) error {
		var err error
		res, err = tx.jobRequestOnce(e.GetRequestId(), e.GetSubmittedAt(), e.GetEval(), func() (*droverv1.Job, error) { return tx.upsertJob(e) })
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return res, changes, nil
}

// upsertJob writes the job and its evaluation and returns the job as
// stored.
func (tx *txn) upsertJob(e *droverv1.JobRegisterEntry) (*droverv1.Job, error) {
	j := e.GetJob()
	if j == nil || j.GetId() == "" {
		return nil, invalidEntry("job registration without a job")
	}
	old := tx.job(j.GetId())
	if err := checkEnforceIndex(j.GetId(), old, e); err != nil {
		return nil, err
	}
	current := old
	if j.Supersedes(old) {
		j.BecomeNextVersion(old, tx.index, e.GetSubmittedAt())
		j.Status = jobStatus(j, tx.jobSet(j.GetId()))
		if err := tx.putJobVersion(j); err != nil {
			return nil, err
		}
		current = j
	}
	if err := tx.upsertJobEval(e.GetEval(), current); err != nil {
		return nil, err
	}
	return current, nil
}

// checkEnforceIndex refuses a registration that asked to apply only at a
// job_modify_index the job is no longer at. The check is made here, where
// writes are serialised, so that of two registrations racing with the same
// index exactly one applies.
func checkEnforceIndex(jobID string, old *droverv1.Job, e *droverv1.JobRegisterEntry) error {
	if e.EnforceIndex == nil {
		return nil
	}
	want := e.GetEnforceIndex()
	switch {
	case old == nil && want != 0:
		return fmt.Errorf("job %q does not exist, want job_modify_index %d: %w", jobID, want, ErrIndexMismatch)
	case old != nil && want == 0:
		return fmt.Errorf("job %q already exists (job_modify_index %d), want none: %w", jobID, old.GetJobModifyIndex(), ErrIndexMismatch)
	case old != nil && old.GetJobModifyIndex() != want:
		return fmt.Errorf("job %q is at job_modify_index %d, want %d: %w", jobID, old.GetJobModifyIndex(), want, ErrIndexMismatch)
	}
	return nil
}

// DeregisterJob applies a JobDeregisterEntry: the job is marked
// stopped (a new version) and the evaluation that stops its allocations is
// written. A request id is handled as in UpsertJob: an id applied
// within JobRequestRetention writes nothing and returns the first result.
func (s *StateStore) DeregisterJob(index uint64, e *droverv1.JobDeregisterEntry) (*droverv1.JobRequestResult, []Change, error) {
	var res *droverv1.JobRequestResult
	changes, err := s.write(index, func(tx *txn) error {
		var err error
		res, err = tx.jobRequestOnce(e.GetRequestId(), e.GetDeregisteredAt(), e.GetEval(), func() (*droverv1.Job, error) { return tx.deregisterJob(e) })
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return res, changes, nil
}

// deregisterJob stops the job, writes its evaluation and returns the job as
// stored.
func (tx *txn) deregisterJob(e *droverv1.JobDeregisterEntry) (*droverv1.Job, error) {
	old := tx.job(e.GetJobId())
	if old == nil {
		return nil, fmt.Errorf("deregister job %q: %w", e.GetJobId(), ErrNotFound)
	}
	current := old
	if !old.GetStop() {
		j := old.CloneVT()
		j.Stop = true
		j.Version++
		j.JobModifyIndex = tx.index
		j.ModifyIndex = tx.index
		j.SubmitTime = e.GetDeregisteredAt()
		j.Status = droverv1.JobStatus_JOB_STATUS_DEAD
		if err := tx.putJobVersion(j); err != nil {
			return nil, err
		}
		current = j
	}
	if err := tx.upsertJobEval(e.GetEval(), current); err != nil {
		return nil, err
	}
	return current, nil
}

// jobRequestOnce runs apply, a job write whose evaluation is eval, at most
// once per request id. A request id with a live stored result (applied
// within JobRequestRetention of at) makes it write nothing and return that
// result. Otherwise it drops the results that expired by at, runs apply and
// returns the result of this write, stored when requestID is set.
func (tx *txn) jobRequestOnce(requestID string, at int64, eval *droverv1.Evaluation, apply func() (*droverv1.Job, error)) (*droverv1.JobRequestResult, error) {
	cutoff, prune := jobRequestCutoff(at)
	if requestID != "" {
		if prev := tx.jobRequest(requestID); prev != nil && (!prune || prev.GetAppliedAt() >= cutoff) {
			return prev, nil
		}
	}
	if prune {
		if err := tx.pruneJobRequests(cutoff); err != nil {
			return nil, err
		}
	}
	job, err := apply()
	if err != nil {
		return nil, err
	}
	res := &droverv1.JobRequestResult{
		RequestId:      requestID,
		Index:          tx.index,
		JobId:          job.GetId(),
		EvalId:         eval.GetId(),
		JobVersion:     job.GetVersion(),
		JobModifyIndex: job.GetJobModifyIndex(),
		AppliedAt:      at,
	}
	if requestID != "" {
		if err := tx.insert(TableJobRequests, res); err != nil {
			return nil, fmt.Errorf("store result of request %q for job %q: %w", requestID, job.GetId(), err)
		}
	}
	return res, nil
}

// jobRequestCutoff is the applied_at time before which results have expired
// for an entry at time at. It is false when at is so early that nothing can
// have expired (the subtraction would overflow).
func jobRequestCutoff(at int64) (int64, bool) {
	cutoff := at - int64(JobRequestRetention)
	return cutoff, cutoff < at
}

// pruneJobRequests deletes the stored results applied before cutoff. It
// walks the applied_at index from the oldest and stops at the first result
// still live, so its cost is the number of results it deletes: each stored
// result is deleted once.
func (tx *txn) pruneJobRequests(cutoff int64) error {
	it, err := tx.db.Get(TableJobRequests, indexAppliedAt)
	if err != nil {
		return fmt.Errorf("scan %s by %s: %w", TableJobRequests, indexAppliedAt, err)
	}
	var expired []*droverv1.JobRequestResult
	for obj := it.Next(); obj != nil; obj = it.Next() {
		r := obj.(*droverv1.JobRequestResult)
		if r.GetAppliedAt() >= cutoff {
			break
		}
		expired = append(expired, r)
	}
	// Delete after the scan: a write transaction's iterator must not
	// outlive changes to the table.
	for _, r := range expired {
		if err := tx.delete(TableJobRequests, r); err != nil {
			return fmt.Errorf("drop expired result of request %q: %w", r.GetRequestId(), err)
		}
	}
	return nil
}

// putJobVersion stores j as the job's current version and in the version
// table. Versions are kept until garbage collection finds no allocation
// that refers to them.
func (tx *txn) putJobVersion(j *droverv1.Job) error {
	if err := tx.insert(TableJobs, j); err != nil {
		return err
	}
	return tx.insert(TableJobVersions, &jobVersion{job: j})
}

// upsertJobEval writes the evaluation of a job registration or stop.
func (tx *txn) upsertJobEval(ev *droverv1.Evaluation, job *droverv1.Job) error {
	if ev == nil {
		return invalidEntry("job %q written without an evaluation", job.GetId())
	}
	if ev.GetJobId() != job.GetId() {
		return invalidEntry("evaluation %s is for job %q, not %q", ev.GetId(), ev.GetJobId(), job.GetId())
	}
	ev.JobModifyIndex = job.GetJobModifyIndex()
	return tx.upsertEval(ev)
}

// jobStatus derives a job's status from its allocations: stopped jobs are
// dead, jobs with a live allocation run, batch jobs whose allocations have
// all ended are dead, and anything else waits for placements.
func jobStatus(j *droverv1.Job, set *allocSet) droverv1.JobStatus {
	switch {
	case j.GetStop():
		return droverv1.JobStatus_JOB_STATUS_DEAD
	case set != nil && set.live > 0:
		return droverv1.JobStatus_JOB_STATUS_RUNNING
	case set.size() > 0 && j.GetType() == droverv1.JobType_JOB_TYPE_BATCH:
		return droverv1.JobStatus_JOB_STATUS_DEAD
	}
	return droverv1.JobStatus_JOB_STATUS_PENDING
}

// refreshJobStatus rewrites a job whose status changed with its allocations.
// The status is not part of the specification, so no version is added.
func (tx *txn) refreshJobStatus(jobID string, set *allocSet) error {
	j := tx.job(jobID)
	if j == nil {
		return nil
	}
	status := jobStatus(j, set)
	if status == j.GetStatus() {
		return nil
	}
	c := j.CloneVT()
	c.Status = status
	c.ModifyIndex = tx.index
	return tx.insert(TableJobs, c)
}
