package scheduler

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// jobPlacements counts where the job's live allocations are: per node for
// the job and for each group (anti-affinity, distinct_hosts), and per value
// of each spread attribute (spread). It is built once per pass from the
// state and then moved by each placement and stop, so that no count is
// recomputed per node or per placement.
type jobPlacements struct {
	onNode nodeCounts
	groups map[string]*groupPlacements
}

// groupPlacements is jobPlacements for one task group.
type groupPlacements struct {
	onNode  nodeCounts
	spreads []*spreadCounts
}

func newJobPlacements(job *droverv1.Job) *jobPlacements {
	p := &jobPlacements{groups: make(map[string]*groupPlacements)}
	for _, tg := range job.GetTaskGroups() {
		p.groups[tg.GetName()] = newGroupPlacements(tg)
	}
	return p
}

func newGroupPlacements(tg *droverv1.TaskGroup) *groupPlacements {
	g := &groupPlacements{}
	var sumWeights int32
	for _, s := range tg.GetSpreads() {
		sumWeights += max(s.GetWeight(), 0)
	}
	for _, s := range tg.GetSpreads() {
		g.spreads = append(g.spreads, newSpreadCounts(s, tg.GetCount(), spreadShare(s.GetWeight(), sumWeights)))
	}
	return g
}

// maxSpreadWeight is the highest weight a spread can have.
const maxSpreadWeight = 100

// spreadShare is how much of the spread component one spread makes up. A
// weight is relative to bin packing as well as to the other spreads: a
// lone spread of weight 100 counts fully, one of weight 50 half; several
// spreads whose weights add up to more than 100 share the whole by weight.
func spreadShare(weight, sumWeights int32) float64 {
	return float64(max(weight, 0)) / float64(max(sumWeights, maxSpreadWeight))
}

// group returns the counts of a task group, starting empty ones for a group
// the job does not have.
func (p *jobPlacements) group(tg *droverv1.TaskGroup) *groupPlacements {
	g, ok := p.groups[tg.GetName()]
	if !ok {
		g = newGroupPlacements(tg)
		p.groups[tg.GetName()] = g
	}
	return g
}

// add counts delta allocations of a group on a node; a node the pass does
// not know (garbage collected) is skipped.
func (p *jobPlacements) add(ns *nodeState, group string, delta int32) {
	if ns == nil {
		return
	}
	p.onNode.add(ns.index, delta)
	g := p.groups[group]
	if g == nil {
		return
	}
	g.onNode.add(ns.index, delta)
	for _, s := range g.spreads {
		s.add(ns.node, delta)
	}
}

// nodeCounts is a counter per node index.
type nodeCounts []int32

func (c nodeCounts) get(i int) int32 {
	if i < len(c) {
		return c[i]
	}
	return 0
}

func (c *nodeCounts) add(i int, delta int32) {
	if i >= len(*c) {
		*c = append(*c, make([]int32, i+1-len(*c))...)
	}
	(*c)[i] += delta
}

// prepare refreshes what a selection reads from the counts but which does
// not change while it ranks nodes.
func (g *groupPlacements) prepare() {
	for _, s := range g.spreads {
		s.prepare()
	}
}

// spreadScore is the group's spread component for a node: each spread's
// boost, weighted by its share of the group's spread weight. Zero means no
// opinion.
func (g *groupPlacements) spreadScore(n *droverv1.Node) float64 {
	var total float64
	for _, s := range g.spreads {
		total += s.weight * s.boost(n)
	}
	return total
}

// distinctValues returns the largest number of values any spread of the
// group found on feasible nodes.
func (g *groupPlacements) distinctValues() int {
	n := 0
	for _, s := range g.spreads {
		n = max(n, len(s.feasible))
	}
	return n
}

// implicitTarget names the share of allocations a spread's targets leave to
// the values they do not list.
const implicitTarget = "*"

// spreadCounts is one spread of a group: how many of the group's live
// allocations sit on each value of its attribute, and what it wants.
type spreadCounts struct {
	attribute string
	// weight is this spread's share of the spread component.
	weight float64
	// desired is the wanted number of allocations per targeted value; nil
	// for an even spread. otherDesired is the remainder the values without
	// a target share; other counts the allocations on those values.
	desired      map[string]float64
	otherDesired float64
	other        int32
	// counts holds a count per value: values with allocations, and the
	// values of feasible nodes, at zero until used.
	counts map[string]int32
	// feasible holds the values of feasible nodes.
	feasible map[string]struct{}
	// Refreshed by prepare once per selection: the least and most used
	// values' counts (even spread), and the lowest and highest target
	// boost over the feasible values (targets).
	min, max        int32
	lowest, highest float64
}

func newSpreadCounts(s *droverv1.Spread, count int32, weight float64) *spreadCounts {
	sc := &spreadCounts{
		attribute: s.GetAttribute(),
		weight:    weight,
		counts:    make(map[string]int32),
		feasible:  make(map[string]struct{}),
	}
	if len(s.GetTargets()) == 0 {
		return sc
	}
	sc.desired = make(map[string]float64)
	var percent int32
	for _, t := range s.GetTargets() {
		sc.desired[t.GetValue()] = float64(t.GetPercent()) * float64(count) / 100
		percent += t.GetPercent()
	}
	if rest, ok := sc.desired[implicitTarget]; ok {
		sc.otherDesired = rest
	} else if percent < 100 {
		sc.otherDesired = float64(100-percent) * float64(count) / 100
	}
	return sc
}

// add counts delta allocations on the node's value; nodes without the
// attribute are not counted.
func (s *spreadCounts) add(n *droverv1.Node, delta int32) {
	v, ok := nodeAttribute(n, s.attribute)
	if !ok {
		return
	}
	if s.desired != nil && !s.targeted(v) {
		s.other += delta
	}
	s.counts[v] += delta
}

func (s *spreadCounts) targeted(v string) bool {
	_, ok := s.desired[v]
	return ok && v != implicitTarget
}

// see records the value of a feasible node.
func (s *spreadCounts) see(n *droverv1.Node) {
	v, ok := nodeAttribute(n, s.attribute)
	if !ok {
		return
	}
	s.feasible[v] = struct{}{}
	if _, known := s.counts[v]; !known {
		s.counts[v] = 0
	}
}

func (s *spreadCounts) prepare() {
	first := true
	if s.desired == nil {
		for _, c := range s.counts {
			if first || c < s.min {
				s.min = c
			}
			if first || c > s.max {
				s.max = c
			}
			first = false
		}
		return
	}
	for v := range s.feasible {
		b := s.targetBoost(v)
		if first || b < s.lowest {
			s.lowest = b
		}
		if first || b > s.highest {
			s.highest = b
		}
		first = false
	}
}

// boost scores placing one more allocation on the node, from -1 (worst) to
// 1. A node without the attribute gets -1.
func (s *spreadCounts) boost(n *droverv1.Node) float64 {
	v, ok := nodeAttribute(n, s.attribute)
	if !ok {
		return -1
	}
	if s.desired == nil {
		return s.evenBoost(s.counts[v])
	}
	b := s.targetBoost(v)
	if s.highest <= s.lowest {
		return b
	}
	// Stretched over the feasible values' range: see targetBoost.
	return min(max(-1+2*(b-s.lowest)/(s.highest-s.lowest), -1), 1)
}

// targetBoost is Nomad's boost for a value with a target:
// (desired - used) / desired, used counting the placement being scored.
// Ranking values by it is D'Hondt apportionment, which keeps every value
// within one allocation of its share. Its differences between values are
// small, though (1/desired per allocation), and bin packing and
// anti-affinity would drown them, so boost stretches them over -1..1: the
// value furthest behind its target scores 1, the furthest ahead -1.
func (s *spreadCounts) targetBoost(v string) float64 {
	desired, used := s.otherDesired, s.other
	if s.targeted(v) {
		desired, used = s.desired[v], s.counts[v]
	}
	if desired <= 0 {
		return -1
	}
	return max(-1, (desired-float64(used+1))/desired)
}

// evenBoost is Nomad's evenSpreadScoreBoost over the values seen: a value
// below the least used one is boosted by how far it lags, the least used
// value by how far the most used is ahead of it, and an already even
// spread gives every value the same penalty. Results are bounded to -1..1
// so that spread cannot outweigh the other components by more than its
// share.
func (s *spreadCounts) evenBoost(cur int32) float64 {
	switch {
	case s.max == 0:
		// Nothing placed yet: no value is better than another.
		return 0
	case cur != s.min:
		if s.min == 0 {
			return -1
		}
		return max(-1, float64(s.min-cur)/float64(s.min))
	case s.min == s.max:
		return -1
	case s.min == 0:
		return 1
	}
	return min(1, float64(s.max-s.min)/float64(s.min))
}
