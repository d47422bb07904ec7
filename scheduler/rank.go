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
