package state

import (
	"fmt"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// UpsertJob applies a JobRegisterEntry: the job and the evaluation that
// schedules it, in one transaction. A changed specification becomes a new
// version; an unchanged one leaves the job as it is and only adds the
// evaluation.
func (s *StateStore) UpsertJob(index uint64, e *droverv1.JobRegisterEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error { return tx.upsertJob(e) })
}

func (tx *txn) upsertJob(e *droverv1.JobRegisterEntry) error {
	j := e.GetJob()
	if j == nil || j.GetId() == "" {
		return invalidEntry("job registration without a job")
	}
	old := tx.job(j.GetId())
	current := old
	if old == nil || old.GetStop() || !old.SpecEqual(j) {
		j.ClearServerFields()
		if old != nil {
			j.Version = old.GetVersion() + 1
			j.CreateIndex = old.GetCreateIndex()
		} else {
			j.CreateIndex = tx.index
		}
		j.JobModifyIndex = tx.index
		j.ModifyIndex = tx.index
		j.SubmitTime = e.GetSubmittedAt()
		j.Status = jobStatus(j, tx.jobSet(j.GetId()))
		if err := tx.putJobVersion(j); err != nil {
			return err
		}
		current = j
	}
	return tx.upsertJobEval(e.GetEval(), current)
}

// DeregisterJob applies a JobDeregisterEntry: the job is marked stopped
// (a new version) and the evaluation that stops its allocations is written.
func (s *StateStore) DeregisterJob(index uint64, e *droverv1.JobDeregisterEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error { return tx.deregisterJob(e) })
}

func (tx *txn) deregisterJob(e *droverv1.JobDeregisterEntry) error {
	old := tx.job(e.GetJobId())
	if old == nil {
		return fmt.Errorf("deregister job %q: %w", e.GetJobId(), ErrNotFound)
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
			return err
		}
		current = j
	}
	return tx.upsertJobEval(e.GetEval(), current)
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
	case set != nil && len(set.ids) > 0 && j.GetType() == droverv1.JobType_JOB_TYPE_BATCH:
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
