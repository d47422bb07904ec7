package scheduler

import (
	"math"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// rankedNode is the node chosen for one placement.
type rankedNode struct {
	node *droverv1.Node
	// score is the normalised score the node won with, for
	// Allocation.score.
	score float64
	// resources is what the allocation will hold: the group's cpu, memory
	// and disk, its address and its ports (label and value).
	resources *droverv1.AllocatedResources
	// alternates are the next best nodes the selection ranked, best first
	// (Config.PlacementAlternates).
	alternates []*droverv1.Node
}

// selectOptions tunes one selection.
type selectOptions struct {
	// penaltyNodes are ranked lower, e.g. the node a failed allocation ran
	// on.
	penaltyNodes map[string]struct{}
	// allocName names the placement in logs.
	allocName string
}

// binPackMaxScore is the best raw bin packing score: a node left with
// nothing free.
const binPackMaxScore = 18.0

// binPackScore scores a node by how full it would be with the ask on top
// of what it holds, from 0 (empty) to 1 (full), as Nomad's BestFit:
// 20 - (10^freeCPU + 10^freeMemory), normalised. Fuller nodes score
// higher, so allocations pack onto few nodes and leave others whole.
func binPackScore(u *fit.Usage, ask *droverv1.Resources) float64 {
	capCPU, capMemory, _ := u.Capacity()
	freeCPU := freeFraction(u.CPU+ask.GetCpuMhz(), capCPU)
	freeMemory := freeFraction(u.Memory+ask.GetMemoryMb(), capMemory)
	score := 20 - (math.Exp(freeCPU*math.Ln10) + math.Exp(freeMemory*math.Ln10))
	return min(max(score, 0), binPackMaxScore) / binPackMaxScore
}

// freeFraction is the share of capacity left unused, 0..1.
func freeFraction(used, capacity int64) float64 {
	if capacity <= 0 {
		return 0
	}
	return min(max(1-float64(used)/float64(capacity), 0), 1)
}

// antiAffinityScore penalises a node that already runs collisions
// allocations of the same job and group, more the more it runs relative to
// the group's count (Nomad's job anti-affinity).
func antiAffinityScore(collisions, count int32) float64 {
	return max(-1, -float64(collisions+1)/float64(max(count, 1)))
}

// penaltyScore is the component of a node the selection was asked to avoid.
const penaltyScore = -1.0

// scoreMean averages the score components that apply to a node; as in
// Nomad, a component that has no opinion is left out rather than counted
// as zero.
type scoreMean struct {
	sum float64
	n   int
}

func (m *scoreMean) add(v float64) {
	m.sum += v
	m.n++
}

func (m *scoreMean) value() float64 {
	if m.n == 0 {
		return 0
	}
	return m.sum / float64(m.n)
}

// rankedList keeps the best few nodes of one selection by score, best
// first; among equal scores the one ranked first stays ahead, as the
// selection's own choice does.
type rankedList struct {
	keep   int
	nodes  []*droverv1.Node
	scores []float64
}

// reset empties the list and sets how many nodes it keeps (0: none).
func (l *rankedList) reset(keep int) {
	l.keep, l.nodes, l.scores = keep, l.nodes[:0], l.scores[:0]
}

// add ranks a node that fits.
func (l *rankedList) add(n *droverv1.Node, score float64) {
	if l.keep <= 1 {
		return
	}
	i := len(l.nodes)
	for i > 0 && l.scores[i-1] < score {
		i--
	}
	if i >= l.keep {
		return
	}
	if len(l.nodes) < l.keep {
		l.nodes, l.scores = append(l.nodes, nil), append(l.scores, 0)
	}
	copy(l.nodes[i+1:], l.nodes[i:len(l.nodes)-1])
	copy(l.scores[i+1:], l.scores[i:len(l.scores)-1])
	l.nodes[i], l.scores[i] = n, score
}

// others returns the kept nodes but chosen, best first, in a new slice.
func (l *rankedList) others(chosen *droverv1.Node) []*droverv1.Node {
	if len(l.nodes) <= 1 {
		return nil
	}
	out := make([]*droverv1.Node, 0, len(l.nodes)-1)
	for _, n := range l.nodes {
		if n != chosen {
			out = append(out, n)
		}
	}
	return out
}
