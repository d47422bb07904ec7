package state

import (
	"fmt"
	"iter"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Deployments in the state store. The scheduler creates a deployment and
// decides its desired counts (through plans); the agents' health reports
// move its per-group counters; operators and the deployment watcher move
// its status (DeploymentStatusUpdateEntry, DeploymentPromoteEntry). A
// deployment in a terminal status never changes again.

// DeploymentByID returns the deployment, or nil.
func (s *Snapshot) DeploymentByID(id string) *droverv1.Deployment {
	return first[*droverv1.Deployment](s, TableDeployments, indexID, id)
}

// Deployments iterates every deployment in id order.
func (s *Snapshot) Deployments() iter.Seq[*droverv1.Deployment] {
	return all[*droverv1.Deployment](s, TableDeployments, indexID)
}

// ListDeployments returns one page of deployments in id order.
func (s *Snapshot) ListDeployments(p Page) ([]*droverv1.Deployment, string) {
	return listUUID(s, TableDeployments, (*droverv1.Deployment).GetId, p)
}

// DeploymentsByJob returns the job's deployments, newest first.
func (s *Snapshot) DeploymentsByJob(jobID string) []*droverv1.Deployment {
	out := slices.Collect(all[*droverv1.Deployment](s, TableDeployments, indexJob, jobID))
	slices.SortFunc(out, newestFirst)
	return out
}

// LatestDeployment returns the job's newest deployment, or nil.
func (s *Snapshot) LatestDeployment(jobID string) *droverv1.Deployment {
	if d := s.DeploymentsByJob(jobID); len(d) > 0 {
		return d[0]
	}
	return nil
}

// LatestStableVersion returns the newest stable version of the job older
// than version, of the job created at createIndex (not an earlier job of
// the same id, purged since), or nil.
func (s *Snapshot) LatestStableVersion(jobID string, version, createIndex uint64) *droverv1.Job {
	var stable *droverv1.Job
	for v := range s.JobVersions(jobID) {
		if v.GetStable() && v.GetVersion() < version && v.GetCreateIndex() == createIndex {
			stable = v
		}
	}
	return stable
}

func newestFirst(a, b *droverv1.Deployment) int {
	switch {
	case a.GetCreateIndex() > b.GetCreateIndex():
		return -1
	case a.GetCreateIndex() < b.GetCreateIndex():
		return 1
	}
	return 0
}

func (tx *txn) deployment(id string) *droverv1.Deployment {
	return get[*droverv1.Deployment](tx, TableDeployments, id)
}

// upsertPlannedDeployment writes the deployment of a plan: a new one, or
// the scheduler's new desired counts for an existing one. What the servers
// count from agents' reports and operators' actions (placed, healthy and
// unhealthy allocations, promotion, deadlines, status) is kept.
func (tx *txn) upsertPlannedDeployment(d *droverv1.Deployment, now int64) error {
	if d.GetId() == "" || d.GetJobId() == "" {
		return invalidEntry("deployment without an id or a job")
	}
	old := tx.deployment(d.GetId())
	c := d.CloneVT()
	c.ModifyIndex, c.ModifyTime = tx.index, now
	if old == nil {
		c.CreateIndex, c.CreateTime = tx.index, now
		if c.Status == droverv1.DeploymentStatus_DEPLOYMENT_STATUS_UNSPECIFIED {
			c.Status = droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING
		}
		for _, g := range c.GetGroups() {
			g.PlacedAllocs, g.HealthyAllocs, g.UnhealthyAllocs, g.Promoted = 0, 0, 0, false
			g.PlacedCanaries = nil
			// A rollout that cannot place anything fails too.
			g.RequireProgressBy = progressDeadlineFrom(g, now)
		}
		return tx.insert(TableDeployments, c)
	}
	if old.GetStatus().Terminal() {
		// A plan made before the deployment ended: nothing to update.
		return nil
	}
	c.CreateIndex, c.CreateTime = old.GetCreateIndex(), old.GetCreateTime()
	c.Status, c.StatusDescription = old.GetStatus(), old.GetStatusDescription()
	for name, g := range c.GetGroups() {
		if prev := old.GetGroups()[name]; prev != nil {
			g.PlacedAllocs, g.HealthyAllocs, g.UnhealthyAllocs = prev.GetPlacedAllocs(), prev.GetHealthyAllocs(), prev.GetUnhealthyAllocs()
			g.Promoted, g.RequireProgressBy, g.PlacedCanaries = prev.GetPromoted(), prev.GetRequireProgressBy(), prev.GetPlacedCanaries()
		} else {
			g.PlacedAllocs, g.HealthyAllocs, g.UnhealthyAllocs, g.Promoted, g.RequireProgressBy = 0, 0, 0, false, 0
			g.PlacedCanaries = nil
		}
	}
	return tx.insert(TableDeployments, c)
}

// countPlacement counts a new allocation of a deployment into the entry's
// copy of it (counts): placed, and a canary when it is one; the group's
// progress deadline starts with its first placement.
func (tx *txn) countPlacement(a *droverv1.Allocation, now int64, counts deploymentCounts) {
	g := counts.group(tx, a.GetDeploymentId(), a.GetTaskGroup())
	if g == nil {
		return
	}
	g.PlacedAllocs++
	if a.GetDeploymentStatus().GetCanary() {
		g.PlacedCanaries = append(g.PlacedCanaries, a.GetId())
	}
	if g.GetRequireProgressBy() == 0 {
		g.RequireProgressBy = progressDeadlineFrom(g, now)
	}
}

// reportHealth records an agent's report of an allocation's health in its
// deployment and counts it in the deployment's group. A healthy report is
// progress: the group's deadline moves to progress_deadline after it. The
// count goes into the entry's copy of the deployment (counts), written
// once after the entry's reports. The report is ignored for an allocation
// outside an active deployment.
func (tx *txn) reportHealth(a *droverv1.Allocation, u *droverv1.AllocClientUpdate, counts deploymentCounts) {
	if u.Healthy == nil || a.GetDeploymentId() == "" {
		return
	}
	var prev *bool
	if st := a.GetDeploymentStatus(); st != nil {
		prev = st.Healthy
	}
	if prev != nil && *prev == u.GetHealthy() {
		return
	}
	st := a.GetDeploymentStatus().CloneVT()
	if st == nil {
		st = &droverv1.AllocDeploymentStatus{}
	}
	healthy := u.GetHealthy()
	st.Healthy, st.Timestamp, st.ModifyIndex = &healthy, u.GetHealthTimestamp(), tx.index
	a.DeploymentStatus = st
	// The allocation keeps its health even when its deployment has ended
	// (a replacement placed late in a rollout turns healthy after it
	// succeeded); only a running deployment counts it.
	d := counts.running(tx, a.GetDeploymentId())
	if d == nil {
		return
	}
	counts.changed(d)
	if g := d.GetGroups()[a.GetTaskGroup()]; g != nil {
		if prev != nil {
			countHealth(g, *prev, -1)
		}
		countHealth(g, healthy, 1)
		if healthy {
			g.RequireProgressBy = max(g.GetRequireProgressBy(), progressDeadlineFrom(g, u.GetHealthTimestamp()))
		}
	}
}

// progressDeadlineFrom is when a group must next make progress, counting
// from t: never (0) when it has no progress deadline.
func progressDeadlineFrom(g *droverv1.DeploymentGroup, t int64) int64 {
	d := g.GetProgressDeadline().AsDuration()
	if d <= 0 {
		return 0
	}
	return t + int64(d)
}

func countHealth(g *droverv1.DeploymentGroup, healthy bool, n int32) {
	if healthy {
		g.HealthyAllocs += n
	} else {
		g.UnhealthyAllocs += n
	}
}

// UpdateDeploymentStatus applies a DeploymentStatusUpdateEntry: the status
// changes (each skipped if its deployment is gone or already terminal), the
// evaluations, and the revert registration if there is one.
func (s *StateStore) UpdateDeploymentStatus(index uint64, e *droverv1.DeploymentStatusUpdateEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		if err := tx.updateDeploymentStatuses(e.GetUpdates(), e.GetUpdatedAt()); err != nil {
			return err
		}
		if r := e.GetRevert(); r != nil {
			if _, err := tx.upsertJob(r); err != nil {
				return fmt.Errorf("revert job %q: %w", r.GetJob().GetId(), err)
			}
		}
		return tx.upsertEvals(e.GetEvals())
	})
}

// updateDeploymentStatuses applies status changes. Entering running or
// paused restarts every group's progress deadline (that of a group that
// has placed something), so that a pause never fails a deployment; a
// successful deployment makes its job version stable.
func (tx *txn) updateDeploymentStatuses(updates []*droverv1.DeploymentStatusUpdate, now int64) error {
	for _, u := range updates {
		d := tx.deployment(u.GetDeploymentId())
		if d == nil || d.GetStatus().Terminal() {
			continue
		}
		if !u.GetStatus().Known() {
			return invalidEntry("deployment %s: status %s", u.GetDeploymentId(), u.GetStatus())
		}
		c := d.CloneVT()
		c.Status, c.StatusDescription = u.GetStatus(), u.GetStatusDescription()
		c.ModifyIndex, c.ModifyTime = tx.index, now
		if !c.GetStatus().Terminal() {
			for _, g := range c.GetGroups() {
				if g.GetRequireProgressBy() != 0 {
					g.RequireProgressBy = progressDeadlineFrom(g, now)
				}
			}
		}
		if err := tx.insert(TableDeployments, c); err != nil {
			return err
		}
		if c.GetStatus() == droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL {
			if err := tx.markStable(c.GetJobId(), c.GetJobVersion(), c.GetJobCreateIndex()); err != nil {
				return err
			}
		}
	}
	return nil
}

// markStable records that a job version's deployment succeeded, on the
// stored version and, if it is still the job's current one, on the job. A
// job registered again since (another create index) is left alone.
func (tx *txn) markStable(jobID string, version, createIndex uint64) error {
	if v := get[*jobVersion](tx, TableJobVersions, jobID, version); v != nil && v.job.GetCreateIndex() == createIndex && !v.job.GetStable() {
		c := v.job.CloneVT()
		c.Stable = true
		if err := tx.insert(TableJobVersions, &jobVersion{job: c}); err != nil {
			return err
		}
	}
	if j := tx.job(jobID); j != nil && j.GetVersion() == version && j.GetCreateIndex() == createIndex && !j.GetStable() {
		c := j.CloneVT()
		c.Stable = true
		c.ModifyIndex = tx.index
		return tx.insert(TableJobs, c)
	}
	return nil
}

// PromoteDeployment applies a DeploymentPromoteEntry: the canaries of the
// named groups (every group with canaries if none is named) are promoted,
// their allocations stop being canaries, and the evaluation that goes on
// with the rollout is written. It is refused (ErrPrecondition) when the
// deployment is not running, a named group has no canaries, or a canary
// is not healthy.
func (s *StateStore) PromoteDeployment(index uint64, e *droverv1.DeploymentPromoteEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		d := tx.deployment(e.GetDeploymentId())
		if d == nil {
			return fmt.Errorf("deployment %s: %w", e.GetDeploymentId(), ErrNotFound)
		}
		if d.GetStatus() != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING {
			return fmt.Errorf("deployment %s is %s, not running: %w", d.GetId(), d.GetStatus().Name(), ErrPrecondition)
		}
		c := d.CloneVT()
		groups, err := promotableGroups(c, e.GetGroups())
		if err != nil {
			return err
		}
		for _, name := range groups {
			g := c.GetGroups()[name]
			if err := tx.promoteCanaries(d.GetId(), name, g); err != nil {
				return err
			}
			g.Promoted = true
			g.RequireProgressBy = progressDeadlineFrom(g, e.GetPromotedAt())
		}
		c.StatusDescription = "Deployment is running"
		c.ModifyIndex, c.ModifyTime = tx.index, e.GetPromotedAt()
		if err := tx.insert(TableDeployments, c); err != nil {
			return err
		}
		if ev := e.GetEval(); ev != nil {
			return tx.upsertEval(ev)
		}
		return nil
	})
}

// promotableGroups returns the groups a promotion applies to, in name
// order: those named, or every group with canaries not yet promoted.
func promotableGroups(d *droverv1.Deployment, named []string) ([]string, error) {
	if len(named) == 0 {
		for name, g := range d.GetGroups() {
			if g.GetDesiredCanaries() > 0 && !g.GetPromoted() {
				named = append(named, name)
			}
		}
		if len(named) == 0 {
			return nil, fmt.Errorf("deployment %s has no canaries to promote: %w", d.GetId(), ErrPrecondition)
		}
	}
	slices.Sort(named)
	for _, name := range named {
		g := d.GetGroups()[name]
		if g == nil || g.GetDesiredCanaries() == 0 {
			return nil, fmt.Errorf("deployment %s: group %q has no canaries: %w", d.GetId(), name, ErrPrecondition)
		}
	}
	return named, nil
}

// promoteCanaries checks that every canary of a group still running is
// healthy, and that as many are as the group wants, and clears their
// canary mark.
func (tx *txn) promoteCanaries(deploymentID, group string, g *droverv1.DeploymentGroup) error {
	var healthy int
	for _, id := range g.GetPlacedCanaries() {
		a := tx.alloc(id)
		if a == nil || a.ServerTerminal() {
			continue
		}
		if !a.GetDeploymentStatus().GetHealthy() {
			return fmt.Errorf("deployment %s: canary %s of group %q is not healthy: %w", deploymentID, id, group, ErrPrecondition)
		}
		healthy++
		c := a.CloneVT()
		c.DeploymentStatus.Canary = false
		c.ModifyIndex = tx.index
		if err := tx.putAlloc(a, c, false); err != nil {
			return err
		}
	}
	if want := int(g.GetDesiredCanaries()); healthy < want {
		return fmt.Errorf("deployment %s: group %q has %d of %d canaries healthy: %w", deploymentID, group, healthy, want, ErrPrecondition)
	}
	return nil
}

// deleteDeployment deletes a terminal deployment.
func (tx *txn) deleteDeployment(id string) (bool, error) {
	d := tx.deployment(id)
	if d == nil || !d.GetStatus().Terminal() {
		return false, nil
	}
	return true, tx.delete(TableDeployments, d)
}

// deleteJobDeployments deletes every deployment of a purged job.
func (tx *txn) deleteJobDeployments(jobID string) error {
	it, err := tx.db.Get(TableDeployments, indexJob, jobID)
	mustRead(err, TableDeployments, indexJob)
	var gone []*droverv1.Deployment
	for obj := it.Next(); obj != nil; obj = it.Next() {
		gone = append(gone, obj.(*droverv1.Deployment))
	}
	for _, d := range gone {
		if err := tx.delete(TableDeployments, d); err != nil {
			return err
		}
	}
	return nil
}
