// Package deploy decides, on the leader, how running deployments move on:
// the deployment watcher. It reads the state and says which deployments
// fail (an unhealthy allocation, a missed progress deadline), which to
// promote (every canary healthy, with auto_promote) and which made
// progress since it last looked (an allocation turned healthy), so that an
// evaluation lets the scheduler place the next batch. The server writes
// what it decides (server/deployer.go).
package deploy

import (
	"iter"
	"maps"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Status descriptions of the deployments the watcher fails.
const (
	FailedUnhealthy = "Failed due to unhealthy allocations"
	FailedDeadline  = "Failed due to progress deadline"
)

// State is what the watcher reads.
type State interface {
	// Deployments iterates every deployment.
	Deployments() iter.Seq[*droverv1.Deployment]
	// AllocByID returns an allocation, nil if there is none.
	AllocByID(id string) *droverv1.Allocation
}

// Decision is what one look at the deployments found.
type Decision struct {
	// Fail lists deployments to fail, with the reason.
	Fail []Failure
	// Promote lists deployments whose canaries are all healthy and whose
	// groups promote by themselves.
	Promote []*droverv1.Deployment
	// Progress lists running deployments whose allocations' health changed
	// since the last look: each needs an evaluation.
	Progress []*droverv1.Deployment
}

// Failure is a deployment to fail.
type Failure struct {
	Deployment  *droverv1.Deployment
	Description string
}

// Watcher remembers what it saw of each running deployment, so that only
// a change calls for an evaluation. A server leading for the first time
// starts with an empty one: its first look writes one evaluation per
// running deployment, which picks up whatever happened while no leader
// watched. The server keeps its watcher across terms, so a server leading
// again evaluates only deployments it has not seen or whose health moved.
type Watcher struct {
	seen map[string]progress
}

// progress is what the watcher compares between looks.
type progress struct{ healthy, unhealthy int32 }

// NewWatcher returns a watcher that has seen nothing.
func NewWatcher() *Watcher { return &Watcher{seen: make(map[string]progress)} }

// Decide looks at every deployment at time now (unix nanoseconds).
func (w *Watcher) Decide(st State, now int64) Decision {
	var dec Decision
	running := make(map[string]bool)
	for d := range st.Deployments() {
		if d.GetStatus() != droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING {
			continue
		}
		running[d.GetId()] = true
		if why := failure(st, d, now); why != "" {
			dec.Fail = append(dec.Fail, Failure{Deployment: d, Description: why})
			continue
		}
		p := progressOf(d)
		switch prev, ok := w.seen[d.GetId()]; {
		case autoPromotable(st, d):
			dec.Promote = append(dec.Promote, d)
		case !ok || prev != p:
			dec.Progress = append(dec.Progress, d)
		}
		w.seen[d.GetId()] = p
	}
	for id := range w.seen {
		if !running[id] {
			delete(w.seen, id)
		}
	}
	return dec
}

// failure says why a running deployment fails now, or "": an allocation of
// a group without a progress deadline turned unhealthy, or a group that is
// not done passed its deadline. (With a deadline, the scheduler replaces
// unhealthy allocations while their reschedule policy allows.) A group whose canaries are all healthy waits for its promotion
// with no deadline: that wait is the operator's.
func failure(st State, d *droverv1.Deployment, now int64) string {
	for _, name := range slices.Sorted(maps.Keys(d.GetGroups())) {
		g := d.GetGroups()[name]
		if g.GetUnhealthyAllocs() > 0 && g.GetProgressDeadline().AsDuration() == 0 {
			return FailedUnhealthy
		}
		if awaitingPromotion(g) && healthyCanaries(st, g) >= int(g.GetDesiredCanaries()) {
			continue
		}
		if by := g.GetRequireProgressBy(); by != 0 && now > by && g.GetHealthyAllocs() < g.GetDesiredTotal() {
			return FailedDeadline
		}
	}
	return ""
}

// awaitingPromotion reports whether a group's rollout waits for its
// canaries to be promoted.
func awaitingPromotion(g *droverv1.DeploymentGroup) bool {
	return g.GetDesiredCanaries() > 0 && !g.GetPromoted()
}

// autoPromotable reports whether a deployment is to be promoted now: some
// group waits for promotion, and every such group promotes by itself and
// has all its canaries healthy.
func autoPromotable(st State, d *droverv1.Deployment) bool {
	waiting := false
	for _, g := range d.GetGroups() {
		if !awaitingPromotion(g) {
			continue
		}
		if !g.GetAutoPromote() || healthyCanaries(st, g) < int(g.GetDesiredCanaries()) {
			return false
		}
		waiting = true
	}
	return waiting
}

// healthyCanaries counts a group's placed canaries that still run and
// turned healthy.
func healthyCanaries(st State, g *droverv1.DeploymentGroup) int {
	n := 0
	for _, id := range g.GetPlacedCanaries() {
		if a := st.AllocByID(id); a != nil && !a.ServerTerminal() && a.GetDeploymentStatus().GetHealthy() {
			n++
		}
	}
	return n
}

func progressOf(d *droverv1.Deployment) progress {
	var p progress
	for _, g := range d.GetGroups() {
		p.healthy += g.GetHealthyAllocs()
		p.unhealthy += g.GetUnhealthyAllocs()
	}
	return p
}
