package scheduler

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// allocAction is what reconciliation did with an existing allocation.
type allocAction int

const (
	actionIgnore allocAction = iota
	actionStop
	actionInPlace
	actionDestructive
	actionReconnect
	actionMigrate
	actionSurge
)

// groupChanges collects the decisions about one task group's allocations
// into the result. It keeps at most one changed copy per allocation, so
// that a reconnect record and an in-place update of the same allocation
// reach the plan as one object, and it counts every allocation once.
type groupChanges struct {
	res     *reconcileResult
	desired *groupDesired
	allocs  []*droverv1.Allocation
	acted   map[string]allocAction
	copies  map[string]*droverv1.Allocation
	// copyOrder keeps the result in a stable order.
	copyOrder []*droverv1.Allocation
	// join is the deployment new and updated allocations join, if any.
	join string
}

func newGroupChanges(res *reconcileResult, group string, allocs []*droverv1.Allocation) *groupChanges {
	d := res.desired[group]
	if d == nil {
		d = &groupDesired{}
		res.desired[group] = d
	}
	return &groupChanges{
		res:     res,
		desired: d,
		allocs:  allocs,
		acted:   make(map[string]allocAction),
		copies:  make(map[string]*droverv1.Allocation),
	}
}

// stop stops an allocation.
func (c *groupChanges) stop(a *droverv1.Allocation, description string, clientStatus droverv1.AllocClientStatus) {
	c.res.stop = append(c.res.stop, newAllocStop(a, description, clientStatus))
	c.acted[a.GetId()] = actionStop
}

// stopAwaitingClient stops an allocation of a gone node as lost, recording
// on it the delayed evaluation that will replace it once its agent has
// stopped it on its own (stop_after_client_disconnect).
func (c *groupChanges) stopAwaitingClient(a *droverv1.Allocation, followup *droverv1.Allocation) {
	st := newAllocStop(a, allocLost, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST)
	st.followup = followup
	c.res.stop = append(c.res.stop, st)
	c.acted[a.GetId()] = actionStop
}

func newAllocStop(a *droverv1.Allocation, description string, clientStatus droverv1.AllocClientStatus) allocStop {
	return allocStop{
		alloc:        a,
		desired:      droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP,
		description:  description,
		clientStatus: clientStatus,
	}
}

// place asks for a new allocation.
func (c *groupChanges) place(p placement) {
	c.res.place = append(c.res.place, c.joined(p))
	c.desired.place++
}

// joined is p joining the group's deployment, if it has one.
func (c *groupChanges) joined(p placement) placement {
	if p.deploymentID == "" {
		p.deploymentID = c.join
	}
	return p
}

// placeCanary places a canary of the group's deployment.
func (c *groupChanges) placeCanary(p placement) {
	c.res.place = append(c.res.place, c.joined(p))
	c.desired.canary++
}

// surge places an allocation's replacement and leaves it running: it is
// stopped once the replacement is healthy (see redundantAllocs).
func (c *groupChanges) surge(a *droverv1.Allocation, p placement) {
	c.res.destructive = append(c.res.destructive, destructiveUpdate{
		stop:  newAllocStop(a, allocUpdating, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED),
		place: c.joined(p),
		surge: true,
	})
	c.acted[a.GetId()] = actionSurge
}

// destructive stops an allocation and places its replacement.
func (c *groupChanges) destructive(a *droverv1.Allocation, p placement) {
	c.res.destructive = append(c.res.destructive, destructiveUpdate{
		stop:  newAllocStop(a, allocUpdating, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED),
		place: c.joined(p),
	})
	c.acted[a.GetId()] = actionDestructive
}

// migrate stops an allocation leaving a draining node and places its
// replacement.
func (c *groupChanges) migrate(a *droverv1.Allocation, p placement) {
	c.res.stop = append(c.res.stop, newAllocStop(a, allocMigrating, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNSPECIFIED))
	c.res.place = append(c.res.place, c.joined(p))
	c.acted[a.GetId()] = actionMigrate
}

// inPlace moves an allocation to the job's version.
func (c *groupChanges) inPlace(a *droverv1.Allocation, job *droverv1.Job, evalID string) {
	cp := c.copyOf(a)
	cp.JobVersion = job.GetVersion()
	cp.EvalId = evalID
	if c.join != "" && cp.GetDeploymentId() != c.join {
		// Its health in the new deployment is not known yet.
		cp.DeploymentId, cp.DeploymentStatus = c.join, nil
	}
	c.acted[a.GetId()] = actionInPlace
}

// reconnected counts an allocation kept after its node came back.
func (c *groupChanges) reconnected(a *droverv1.Allocation) {
	c.acted[a.GetId()] = actionReconnect
}

// copyOf returns the allocation's changed copy, making it on first use.
func (c *groupChanges) copyOf(a *droverv1.Allocation) *droverv1.Allocation {
	if cp, ok := c.copies[a.GetId()]; ok {
		return cp
	}
	cp := a.CloneVT()
	c.copies[a.GetId()] = cp
	c.copyOrder = append(c.copyOrder, a)
	return cp
}

// finish moves the changed copies into the result, dropping those of
// allocations that are being stopped, and counts the decisions about every
// allocation the servers still want running.
func (c *groupChanges) finish() {
	for _, a := range c.copyOrder {
		switch c.acted[a.GetId()] {
		case actionStop, actionDestructive, actionMigrate:
			continue
		}
		cp := c.copies[a.GetId()]
		if cp.GetJobVersion() != a.GetJobVersion() {
			c.res.inplace = append(c.res.inplace, cp)
		} else {
			c.res.attributeUpdates = append(c.res.attributeUpdates, cp)
		}
	}
	for _, a := range c.allocs {
		switch c.acted[a.GetId()] {
		case actionStop:
			c.desired.stop++
		case actionInPlace:
			c.desired.inplace++
		case actionDestructive, actionSurge:
			c.desired.destructive++
		case actionReconnect:
			c.desired.reconnect++
		case actionMigrate:
			c.desired.migrate++
		default:
			// Allocations stopped before are history, not left alone.
			if !a.ServerTerminal() {
				c.desired.ignore++
			}
		}
	}
}
