package scheduler

import (
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"slices"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// evalContext is one scheduling pass of one evaluation: the state it reads,
// the plan it builds, and what that plan already does to each node, so that
// every placement sees the ones before it.
type evalContext struct {
	state State
	cfg   Config
	eval  *droverv1.Evaluation
	job   *droverv1.Job
	rng   *rand.Rand
	log   *slog.Logger

	p         *droverv1.Plan
	nodePlans map[string]*droverv1.NodePlan
	// stopped holds every allocation the plan stops; lost the ones it stops
	// as lost, which alone free their resources (DESIGN 6); updated the
	// state allocations the plan replaces by an updated copy.
	stopped map[string]struct{}
	lost    map[string]struct{}
	updated map[string]struct{}
	// altered holds the nodes on which lost, updated or releaseFor have
	// ever changed what the state's allocations hold in this pass: their
	// usage cannot come from Config.UsageCache.
	altered map[string]struct{}
	// planIPs are the addresses the plan's allocations hold, which the
	// state does not know about yet.
	planIPs map[netip.Addr]struct{}

	// nodes and nodeByID cache the state's nodes with their usage; built on
	// first use, since a pass that only stops allocations needs none.
	nodes    []*nodeState
	nodeByID map[string]*nodeState
	// placed counts where the job's live allocations are; built on first
	// use and kept current by planPlace and planStop.
	placed  *jobPlacements
	regexps map[string]*regexp.Regexp
	// alternates are the other nodes ranked for each placement, written
	// into the plan by attachAlternates.
	alternates map[*droverv1.Allocation][]*droverv1.Node
}

// nodeState is what one pass knows about a node beyond the node itself.
type nodeState struct {
	node *droverv1.Node
	// index is the node's position in evalContext.nodes, which per-node
	// counters use instead of maps.
	index int
	// usage is what the node holds once the plan so far is applied; nil
	// until first needed, and again after a change the counters cannot
	// follow (an update or a lost stop).
	usage *fit.Usage
	// row is the node's allocation row in the pass's state, as
	// NodeAllocsShared gives it. Read only.
	row []*droverv1.Allocation
	// classKey stands for the node's computed class in the pass's caches;
	// keyed says whether it has been computed.
	classKey uint64
	keyed    bool
}

// newEvalContext starts a pass: an empty plan for the evaluation against
// the state's index.
func newEvalContext(st State, cfg Config, eval *droverv1.Evaluation, job *droverv1.Job) *evalContext {
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &evalContext{
		state: st,
		cfg:   cfg,
		eval:  eval,
		job:   job,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		log:   logger,
		p: &droverv1.Plan{
			EvalId:        eval.GetId(),
			Priority:      eval.GetPriority(),
			JobId:         eval.GetJobId(),
			SnapshotIndex: st.Index(),
		},
		nodePlans: make(map[string]*droverv1.NodePlan),
		stopped:   make(map[string]struct{}),
		lost:      make(map[string]struct{}),
		updated:   make(map[string]struct{}),
		altered:   make(map[string]struct{}),
		planIPs:   make(map[netip.Addr]struct{}),
		regexps:   make(map[string]*regexp.Regexp),
	}
}

// plan returns the plan built so far.
func (c *evalContext) plan() *droverv1.Plan { return c.p }

// now returns the pass's notion of the current time, unix nanoseconds.
func (c *evalContext) now() int64 {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now().UnixNano()
}

func (c *evalContext) nodePlan(nodeID string) *droverv1.NodePlan {
	np, ok := c.nodePlans[nodeID]
	if !ok {
		np = &droverv1.NodePlan{NodeId: nodeID}
		c.nodePlans[nodeID] = np
		c.p.NodePlans = append(c.p.NodePlans, np)
	}
	return np
}

// planPlace adds a new allocation to the plan and counts it on its node.
func (c *evalContext) planPlace(a *droverv1.Allocation) {
	np := c.nodePlan(a.GetNodeId())
	np.Allocations = append(np.Allocations, a)
	c.holdIP(a)
	ns := c.nodeByID[a.GetNodeId()]
	if ns != nil && ns.usage != nil {
		ns.usage.Add(a)
	}
	if c.placed != nil && c.counts(a) {
		c.placed.add(ns, a.GetTaskGroup(), 1)
	}
}

// planAlternates names the other nodes a new placement may go to when its
// own no longer takes it (NodePlan.alternates); attachAlternates writes
// them into the plan once it is complete.
func (c *evalContext) planAlternates(a *droverv1.Allocation, nodes []*droverv1.Node) {
	if len(nodes) == 0 {
		return
	}
	if c.alternates == nil {
		c.alternates = make(map[*droverv1.Allocation][]*droverv1.Node)
	}
	c.alternates[a] = nodes
}

// attachAlternates writes the alternates of the plan's placements into
// their node plans, one entry per allocation, as indexes into the plan's
// alternate_nodes. It runs once the plan is complete: node plans change
// while a pass builds them (updates replace allocations, a node plan left
// empty is dropped), and an index into them taken earlier could be wrong.
func (c *evalContext) attachAlternates() {
	if len(c.alternates) == 0 {
		return
	}
	index := make(map[string]uint32)
	for _, np := range c.p.GetNodePlans() {
		np.Alternates = nil
		for i, a := range np.GetAllocations() {
			nodes := c.alternates[a]
			if len(nodes) == 0 {
				continue
			}
			if np.Alternates == nil {
				np.Alternates = make([]*droverv1.PlacementAlternates, len(np.GetAllocations()))
				for j := range np.Alternates {
					np.Alternates[j] = &droverv1.PlacementAlternates{}
				}
			}
			idx := make([]uint32, len(nodes))
			for k, n := range nodes {
				j, ok := index[n.GetId()]
				if !ok {
					j = uint32(len(c.p.AlternateNodes))
					c.p.AlternateNodes = append(c.p.AlternateNodes, n.GetId())
					index[n.GetId()] = j
				}
				idx[k] = j
			}
			np.Alternates[i].Nodes = idx
		}
	}
}

// planUpdate adds an updated copy of an existing allocation to the plan. A
// second update of the same allocation replaces the first.
func (c *evalContext) planUpdate(a *droverv1.Allocation) {
	np := c.nodePlan(a.GetNodeId())
	replaced := false
	for i, old := range np.Allocations {
		if old.GetId() == a.GetId() {
			np.Allocations[i], replaced = a, true
			break
		}
	}
	if !replaced {
		np.Allocations = append(np.Allocations, a)
	}
	c.holdIP(a)
	// The copy normally keeps node and group; if it is no longer live (an
	// attribute update that ends it), it leaves the counts.
	if c.placed != nil && !c.counts(a) {
		if orig := c.stateAlloc(a.GetNodeId(), a.GetId()); orig != nil && c.counts(orig) {
			c.placed.add(c.nodeByID[a.GetNodeId()], a.GetTaskGroup(), -1)
		}
	}
	c.updated[a.GetId()] = struct{}{}
	c.invalidate(a.GetNodeId())
}

// planStop asks for an allocation to be stopped. Its resources stay held
// unless clientStatus is LOST, but it no longer counts for anti-affinity,
// distinct hosts and spread.
func (c *evalContext) planStop(a *droverv1.Allocation, desired droverv1.AllocDesiredStatus, description string,
	clientStatus droverv1.AllocClientStatus, followupEvalID string) {
	if c.placed != nil && c.counts(a) {
		c.placed.add(c.nodeByID[a.GetNodeId()], a.GetTaskGroup(), -1)
	}
	np := c.nodePlan(a.GetNodeId())
	np.Stops = append(np.Stops, &droverv1.AllocStop{
		AllocId:            a.GetId(),
		DesiredStatus:      desired,
		DesiredDescription: description,
		ClientStatus:       clientStatus,
		FollowupEvalId:     followupEvalID,
	})
	c.stopped[a.GetId()] = struct{}{}
	if clientStatus == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST {
		c.lost[a.GetId()] = struct{}{}
		c.invalidate(a.GetNodeId())
	}
}

// unplanStop takes back a stop planned for an allocation that is not lost,
// dropping its node's plan if nothing is left in it.
func (c *evalContext) unplanStop(a *droverv1.Allocation) {
	np := c.nodePlans[a.GetNodeId()]
	if np == nil {
		return
	}
	np.Stops = slices.DeleteFunc(np.Stops, func(s *droverv1.AllocStop) bool { return s.GetAllocId() == a.GetId() })
	delete(c.stopped, a.GetId())
	if c.placed != nil && c.counts(a) {
		c.placed.add(c.nodeByID[a.GetNodeId()], a.GetTaskGroup(), 1)
	}
	if len(np.GetStops()) == 0 && len(np.GetAllocations()) == 0 {
		delete(c.nodePlans, a.GetNodeId())
		c.p.NodePlans = slices.DeleteFunc(c.p.NodePlans, func(n *droverv1.NodePlan) bool { return n == np })
	}
}

// releaseFor counts an allocation's resources as free on its node, as if
// it were stopped as lost, until the returned function is called.
func (c *evalContext) releaseFor(a *droverv1.Allocation) func() {
	_, wasLost := c.lost[a.GetId()]
	c.lost[a.GetId()] = struct{}{}
	c.invalidate(a.GetNodeId())
	return func() {
		if !wasLost {
			delete(c.lost, a.GetId())
		}
		c.invalidate(a.GetNodeId())
	}
}

// counts reports whether an allocation counts as one of the job's live
// allocations: of this job, wanted running, not stopped by this plan.
func (c *evalContext) counts(a *droverv1.Allocation) bool {
	if a.GetJobId() != c.job.GetId() || a.Terminal() {
		return false
	}
	_, stopped := c.stopped[a.GetId()]
	return !stopped
}

func (c *evalContext) holdIP(a *droverv1.Allocation) {
	if ip, err := netip.ParseAddr(a.GetResources().GetIp()); err == nil {
		c.planIPs[ip] = struct{}{}
	}
}

// invalidate drops a node's cached usage after a change Usage cannot
// subtract, and marks the node altered: its usage is built from now on.
func (c *evalContext) invalidate(nodeID string) {
	c.altered[nodeID] = struct{}{}
	if ns := c.nodeByID[nodeID]; ns != nil {
		ns.usage = nil
	}
}

func (c *evalContext) stateAlloc(nodeID, id string) *droverv1.Allocation {
	for _, a := range c.storedRow(nodeID) {
		if a.GetId() == id {
			return a
		}
	}
	return nil
}

// storedRow is the node's allocation row in the pass's state: its
// record's once the pass has one. Read only.
func (c *evalContext) storedRow(nodeID string) []*droverv1.Allocation {
	if ns := c.nodeByID[nodeID]; ns != nil {
		return ns.row
	}
	return c.state.NodeAllocsShared(nodeID)
}

// proposedAllocs returns the allocations that hold resources on the node
// once the plan is applied: the state's that are not client-terminal, less
// those the plan stops as lost, with the plan's updated copies in place of
// the originals, plus the plan's placements.
func (c *evalContext) proposedAllocs(nodeID string) []*droverv1.Allocation {
	var out []*droverv1.Allocation
	c.eachProposed(nodeID, func(a *droverv1.Allocation) { out = append(out, a) })
	return out
}

func (c *evalContext) eachProposed(nodeID string, yield func(*droverv1.Allocation)) {
	for _, a := range c.storedRow(nodeID) {
		if !fit.Holds(a) {
			continue
		}
		if _, ok := c.lost[a.GetId()]; ok {
			continue
		}
		if _, ok := c.updated[a.GetId()]; ok {
			continue
		}
		yield(a)
	}
	if np := c.nodePlans[nodeID]; np != nil {
		for _, a := range np.GetAllocations() {
			if fit.Holds(a) {
				yield(a)
			}
		}
	}
}

// usageOf returns what the node holds once the plan so far is applied.
func (c *evalContext) usageOf(ns *nodeState) *fit.Usage {
	if ns.usage == nil {
		ns.usage = c.buildUsage(ns)
	}
	return ns.usage
}

// buildUsage counts what the node holds once the plan so far is applied:
// over the server's cached usage of the node's stored allocations when
// the plan leaves those as they are, else from scratch.
func (c *evalContext) buildUsage(ns *nodeState) *fit.Usage {
	id := ns.node.GetId()
	if _, altered := c.altered[id]; altered || c.cfg.UsageCache == nil {
		u := fit.NewUsage(ns.node)
		c.eachProposed(id, func(a *droverv1.Allocation) { u.Add(a) })
		return u
	}
	u := c.cfg.UsageCache.Base(ns.node, ns.row).Overlay()
	// An unaltered node's plan holds placements only (an update would
	// have altered it); Add skips those that hold nothing.
	for _, a := range c.nodePlans[id].GetAllocations() {
		u.Add(a)
	}
	return u
}

// nodeStateBlock is how many node records allNodes allocates at once.
const nodeStateBlock = 1024

// allNodes returns every node of the state, in id order, each with its
// allocation row.
func (c *evalContext) allNodes() []*nodeState {
	if c.nodeByID != nil {
		return c.nodes
	}
	// Records in blocks of nodeStateBlock, and a map sized once: a pass
	// over 5,000 nodes should not make 5,000 small allocations.
	var block []nodeState
	for n, row := range c.state.NodesWithAllocs() {
		if len(block) == cap(block) {
			block = make([]nodeState, 0, nodeStateBlock)
		}
		block = append(block, nodeState{node: n, index: len(c.nodes), row: row})
		c.nodes = append(c.nodes, &block[len(block)-1])
	}
	c.nodeByID = make(map[string]*nodeState, len(c.nodes))
	for _, ns := range c.nodes {
		c.nodeByID[ns.node.GetId()] = ns
	}
	if c.cfg.UsageCache != nil {
		c.cfg.UsageCache.trim(len(c.nodes), func(id string) bool { return c.nodeByID[id] != nil })
	}
	return c.nodes
}

// lookupNode returns the pass's record of a node, adding it if the state
// listing did not have it.
func (c *evalContext) lookupNode(n *droverv1.Node) *nodeState {
	c.allNodes()
	if ns := c.nodeByID[n.GetId()]; ns != nil {
		return ns
	}
	return c.addNode(n)
}

func (c *evalContext) addNode(n *droverv1.Node) *nodeState {
	ns := &nodeState{node: n, index: len(c.nodes), row: c.state.NodeAllocsShared(n.GetId())}
	c.nodes = append(c.nodes, ns)
	c.nodeByID[n.GetId()] = ns
	return ns
}

// classKey returns the node's class key, cached for the pass.
func (c *evalContext) classKey(ns *nodeState) uint64 {
	if !ns.keyed {
		ns.classKey, ns.keyed = classKey(ns.node), true
	}
	return ns.classKey
}

// placements returns where the job's live allocations are, counting this
// plan's placements and stops.
func (c *evalContext) placements() *jobPlacements {
	if c.placed != nil {
		return c.placed
	}
	c.allNodes()
	p := newJobPlacements(c.job)
	allocs, _ := c.state.AllocsByJob(c.job.GetId())
	for _, a := range allocs {
		if c.counts(a) {
			p.add(c.nodeByID[a.GetNodeId()], a.GetTaskGroup(), 1)
		}
	}
	for _, np := range c.p.GetNodePlans() {
		for _, a := range np.GetAllocations() {
			if _, update := c.updated[a.GetId()]; !update && c.counts(a) {
				p.add(c.nodeByID[a.GetNodeId()], a.GetTaskGroup(), 1)
			}
		}
	}
	c.placed = p
	return p
}

// compileRegexp returns the compiled expression, compiled once per pass.
func (c *evalContext) compileRegexp(expr string) (*regexp.Regexp, error) {
	if re, ok := c.regexps[expr]; ok {
		return re, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	c.regexps[expr] = re
	return re, nil
}
