package state

import droverv1 "github.com/droverhq/drover/proto/drover/v1"

// deploymentCounts holds the copies of the running deployments that one
// entry's placements or health reports count into, by id, each copied once
// and written once when the entry's allocations are done: an entry of
// hundreds of allocations of one rollout would otherwise copy and write the
// deployment (and its radix path) once per allocation. Nothing else may
// read or write those deployments between the first count and write.
type deploymentCounts map[string]*countedDeployment

// countedDeployment is an entry's copy of a deployment.
type countedDeployment struct {
	d       *droverv1.Deployment // nil: missing or ended
	changed bool
}

// running returns the entry's copy of a running deployment, or nil.
func (c deploymentCounts) running(tx *txn, id string) *droverv1.Deployment {
	if cd, ok := c[id]; ok {
		return cd.d
	}
	cd := &countedDeployment{}
	if d := tx.deployment(id); d != nil && !d.GetStatus().Terminal() {
		cd.d = d.CloneVT()
	}
	c[id] = cd
	return cd.d
}

// group returns the group of the entry's copy of a running deployment,
// marking the copy changed, or nil when either is missing.
func (c deploymentCounts) group(tx *txn, id, group string) *droverv1.DeploymentGroup {
	d := c.running(tx, id)
	g := d.GetGroups()[group]
	if g != nil {
		c.changed(d)
	}
	return g
}

// changed marks the copy d (from running) to be written.
func (c deploymentCounts) changed(d *droverv1.Deployment) {
	c[d.GetId()].changed = true
}

// write stores the changed copies, modified at the entry's index and now,
// in id order.
func (c deploymentCounts) write(tx *txn, now int64) error {
	for _, id := range sortedKeys(c) {
		cd := c[id]
		if !cd.changed {
			continue
		}
		cd.d.ModifyIndex, cd.d.ModifyTime = tx.index, now
		if err := tx.insert(TableDeployments, cd.d); err != nil {
			return err
		}
	}
	return nil
}
