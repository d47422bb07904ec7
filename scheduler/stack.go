package scheduler

import (
	"log/slog"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
	"github.com/droverhq/drover/scheduler/ippool"
)

// stack picks nodes for one job's placements in one pass: it walks the
// candidate nodes in an order shuffled once per pass, keeps those that are
// feasible and have room, ranks a bounded number of them and returns the
// best.
type stack struct {
	ctx *evalContext
	job *droverv1.Job
	// candidates in shuffled order; offset is where the next selection
	// starts, so that successive selections look at different nodes.
	candidates []*nodeState
	offset     int
	groups     map[string]*groupStack
	addrs      *ippool.Picker
	// ports is scratch for a draw that only checks a candidate's ports;
	// bestPorts holds those drawn on the chosen node.
	ports, bestPorts []int32
	// ranked holds the best nodes of the selection so far, best first,
	// when the group names alternates.
	ranked rankedList
}

// groupStack is what a stack keeps per task group.
type groupStack struct {
	tg      *droverv1.TaskGroup
	feas    *feasibility
	placed  *groupPlacements
	limit   int
	metrics selectMetrics
	// alternates is how many other nodes its placements name
	// (Config.PlacementAlternates): none for a group whose placements only
	// suit the node the selection chose, one with spreads (the choice
	// balances the spread) or distinct_hosts (the applier cannot tell
	// whether an alternate already runs one of the job's allocations).
	alternates int
	// failed holds the metrics of the group's last selection that found
	// nothing, if any.
	failed *selectMetrics
}

// newStack returns a stack over every node of the state.
func newStack(ctx *evalContext, job *droverv1.Job) *stack {
	s := &stack{
		ctx:    ctx,
		job:    job,
		groups: make(map[string]*groupStack),
		addrs:  newAddressPicker(ctx),
	}
	s.setNodes(nil)
	return s
}

// setNodes restricts the candidates to nodes (the system scheduler passes
// one); nil puts every node of the state back.
func (s *stack) setNodes(nodes []*droverv1.Node) {
	var list []*nodeState
	if nodes == nil {
		list = append(list, s.ctx.allNodes()...)
	} else {
		list = make([]*nodeState, 0, len(nodes))
		for _, n := range nodes {
			list = append(list, s.ctx.lookupNode(n))
		}
	}
	s.ctx.rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	s.candidates, s.offset = list, 0
}

// spreadSampleFactor and spreadSampleCap size the sample of a spread group.
// Ranking MaxCandidates nodes suits bin packing, where any good node will
// do. Spread wants the sample to contain the values that lag behind: with
// twice as many candidates as the attribute has values on feasible nodes,
// each value is expected about twice in a sample when values are evenly
// spread over nodes. The cap keeps a spread over a nearly unique attribute
// (a host name) from turning every placement into a full scan; the rolling
// offset still walks all candidates over successive placements.
const (
	spreadSampleFactor = 2
	spreadSampleCap    = 8
)

// group returns the stack's record of a task group, preparing its
// feasibility cache, counts and sample size on first use.
func (s *stack) group(tg *droverv1.TaskGroup) *groupStack {
	if g, ok := s.groups[tg.GetName()]; ok {
		return g
	}
	base := s.ctx.cfg.MaxCandidates
	if base <= 0 {
		base = DefaultMaxCandidates
	}
	g := &groupStack{
		tg:     tg,
		feas:   newFeasibility(s.ctx, s.job, tg),
		placed: s.ctx.placements().group(tg),
		limit:  base,
	}
	if len(g.placed.spreads) > 0 {
		for _, ns := range s.candidates {
			if g.feas.check(s.ctx, ns) != codeFeasible {
				continue
			}
			for _, sp := range g.placed.spreads {
				sp.see(ns.node)
			}
		}
		if want := spreadSampleFactor * g.placed.distinctValues(); want > g.limit {
			g.limit = min(want, spreadSampleCap*base)
		}
	}
	if len(g.placed.spreads) == 0 && !g.feas.distinctJob && !g.feas.distinctGroup {
		g.alternates = s.ctx.cfg.PlacementAlternates
	}
	s.groups[tg.GetName()] = g
	return g
}

// selectNode returns the best node for one allocation of the group, or nil
// when no candidate is feasible and has room. The caller places the
// allocation with planPlace, which counts it for the next selections.
func (s *stack) selectNode(tg *droverv1.TaskGroup, opts selectOptions) *rankedNode {
	g := s.group(tg)
	g.tg = tg
	g.metrics.reset()
	g.placed.prepare()
	s.ranked.reset(g.alternates + 1)
	pick := addressChoice{picker: s.addrs}
	var (
		best      *nodeState
		bestScore float64
		found     int
		visited   int
	)
	n := len(s.candidates)
	for ; visited < n && found < g.limit; visited++ {
		ns := s.candidates[(s.offset+visited)%n]
		score, ok := s.rank(g, ns, &pick, opts)
		if !ok {
			continue
		}
		found++
		s.ranked.add(ns.node, score)
		if best == nil || score > bestScore {
			best, bestScore = ns, score
		}
	}
	if n > 0 {
		s.offset = (s.offset + visited) % n
	}
	if best == nil {
		g.failed = g.metrics.clone()
		s.ctx.log.Debug("no node for placement", slog.String("eval_id", s.ctx.eval.GetId()),
			slog.String("alloc", opts.allocName), slog.Int("nodes_evaluated", int(g.metrics.evaluated)))
		return nil
	}
	// Ports are drawn on the chosen node only: fits checked that it has
	// them, and a draw on every candidate ranked cost a lookup per port
	// probed on each.
	s.bestPorts, _ = assignPorts(s.ctx.usageOf(best), tg.GetResources().GetPorts(), best.node, s.ctx.rng, s.bestPorts)
	return &rankedNode{node: best.node, score: bestScore, resources: s.allocated(tg, pick.addr),
		alternates: s.ranked.others(best.node)}
}

// fitsAlone reports whether one allocation of the group would fit on the
// node, leaving the group's failure as it was.
func (s *stack) fitsAlone(tg *droverv1.TaskGroup, n *droverv1.Node, opts selectOptions) bool {
	g := s.group(tg)
	failed := g.failed
	defer func() { g.failed = failed }()
	s.setNodes([]*droverv1.Node{n})
	defer s.setNodes(nil)
	return s.selectNode(tg, opts) != nil
}

// selectPinned is selectNode on a stack narrowed to one pinned node (a
// system job's placement). counts is false when the node is filtered out:
// nothing is owed there, and the group's failure is left as it was. A node
// that lacked room adds its selection to the group's failure, so that the
// failure sums every node short of room rather than naming the last one.
func (s *stack) selectPinned(tg *droverv1.TaskGroup, opts selectOptions) (rn *rankedNode, counts bool) {
	g := s.group(tg)
	before := g.failed
	rn = s.selectNode(tg, opts)
	if rn != nil {
		return rn, false
	}
	if g.failed.exhausted == 0 {
		g.failed = before
		return nil, false
	}
	if before != nil {
		before.add(g.failed)
		g.failed = before
	}
	return nil, true
}

// rank checks one candidate and scores it; ok is false when the node is
// filtered or lacks room, which the group's metrics record.
func (s *stack) rank(g *groupStack, ns *nodeState, pick *addressChoice, opts selectOptions) (score float64, ok bool) {
	u, ok := s.fits(g, ns, pick)
	if !ok {
		return 0, false
	}
	return s.score(g, ns, u, opts), true
}

// fits checks feasibility and room, ports included, drawing the
// selection's address on first need. It returns the node's usage.
func (s *stack) fits(g *groupStack, ns *nodeState, pick *addressChoice) (*fit.Usage, bool) {
	m := &g.metrics
	m.evaluated++
	if code := g.feas.check(s.ctx, ns); code != codeFeasible {
		m.filter(code)
		return nil, false
	}
	if s.collides(g, ns) {
		m.filter(g.feas.code(reasonDistinctHosts))
		return nil, false
	}
	ask := g.tg.GetResources()
	u := s.ctx.usageOf(ns)
	if dim := u.Fits(ask); dim != "" {
		m.exhaust(dim)
		return nil, false
	}
	if asks := ask.GetPorts(); !u.PortsSurelyFree(len(asks)) {
		var portsFree bool
		s.ports, portsFree = assignPorts(u, asks, ns.node, s.ctx.rng, s.ports)
		if !portsFree {
			m.exhaust(fit.DimensionPorts)
			return nil, false
		}
	}
	if !pick.ready() {
		m.exhaust(fit.DimensionIP)
		return nil, false
	}
	return u, true
}

// score is the mean of the components that apply to a node that fits: bin
// packing, anti-affinity, the penalty, spread.
func (s *stack) score(g *groupStack, ns *nodeState, u *fit.Usage, opts selectOptions) float64 {
	var mean scoreMean
	mean.add(binPackScore(u, g.tg.GetResources()))
	if c := g.placed.onNode.get(ns.index); c > 0 {
		mean.add(antiAffinityScore(c, g.tg.GetCount()))
	}
	if len(opts.penaltyNodes) > 0 {
		if _, ok := opts.penaltyNodes[ns.node.GetId()]; ok {
			mean.add(penaltyScore)
		}
	}
	if sp := g.placed.spreadScore(ns.node); sp != 0 {
		mean.add(sp)
	}
	return mean.value()
}

// collides reports whether distinct_hosts forbids the node: the job (or the
// group, for a group-level constraint) already has a live allocation there.
func (s *stack) collides(g *groupStack, ns *nodeState) bool {
	switch {
	case g.feas.distinctJob:
		return s.ctx.placements().onNode.get(ns.index) > 0
	case g.feas.distinctGroup:
		return g.placed.onNode.get(ns.index) > 0
	}
	return false
}

// allocated builds what the chosen node's allocation will hold.
func (s *stack) allocated(tg *droverv1.TaskGroup, addr string) *droverv1.AllocatedResources {
	ask := tg.GetResources()
	r := &droverv1.AllocatedResources{
		CpuMhz:   ask.GetCpuMhz(),
		MemoryMb: ask.GetMemoryMb(),
		DiskMb:   ask.GetDiskMb(),
		Ip:       addr,
	}
	for i, p := range ask.GetPorts() {
		r.Ports = append(r.Ports, &droverv1.AllocatedPort{Label: p.GetLabel(), Value: s.bestPorts[i]})
	}
	return r
}

// addressChoice is the address of one selection: drawn once, when the
// first candidate fits, since it does not depend on the node.
type addressChoice struct {
	picker *ippool.Picker
	tried  bool
	ok     bool
	addr   string
}

// ready reports whether the selection has an address, drawing one on
// first use; true when allocations get no address.
func (c *addressChoice) ready() bool {
	if !c.picker.Enabled() {
		return true
	}
	if !c.tried {
		c.tried = true
		if a, ok := c.picker.Pick(); ok {
			c.addr, c.ok = a.String(), true
		}
	}
	return c.ok
}

// failure returns the group's placement failure: how many nodes its last
// selection that found nothing evaluated, filtered and found exhausted, and
// why (the last selection's, if none failed). A failed selection has looked
// at every candidate, so its counts cover the cluster. The caller sets
// unplaced.
func (s *stack) failure(tg *droverv1.TaskGroup) *droverv1.PlacementFailure {
	g := s.group(tg)
	m := g.failed
	if m == nil {
		m = &g.metrics
	}
	f := &droverv1.PlacementFailure{
		TaskGroup:      tg.GetName(),
		NodesEvaluated: m.evaluated,
		NodesFiltered:  m.filtered,
		NodesExhausted: m.exhausted,
		NodesAvailable: s.available(),
	}
	for code, count := range m.filteredBy {
		if count > 0 {
			if f.FilteredBy == nil {
				f.FilteredBy = make(map[string]int32)
			}
			f.FilteredBy[g.feas.reason(uint16(code))] += count
		}
	}
	for i, count := range m.exhaustedBy {
		if count > 0 {
			if f.ExhaustedBy == nil {
				f.ExhaustedBy = make(map[string]int32)
			}
			f.ExhaustedBy[dimension(i)] = count
		}
	}
	return f
}

// available counts, per datacenter of the job, the nodes that take new
// work.
func (s *stack) available() map[string]int32 {
	out := make(map[string]int32, len(s.job.GetDatacenters()))
	for _, dc := range s.job.GetDatacenters() {
		out[dc] = 0
	}
	for _, ns := range s.ctx.allNodes() {
		if _, ok := out[ns.node.GetDatacenter()]; ok && nodeUnavailable(ns.node) == "" {
			out[ns.node.GetDatacenter()]++
		}
	}
	return out
}

// classEligibility reports, per computed class of the nodes checked so far,
// whether any node of the class was feasible for any group of the job; and
// whether the job has constraints classes cannot capture (then any change
// may make room).
func (s *stack) classEligibility() (eligible map[string]bool, escaped bool) {
	eligible = make(map[string]bool)
	for _, g := range s.groups {
		for _, res := range g.feas.byClass {
			eligible[res.class] = eligible[res.class] || res.code == codeFeasible
		}
	}
	return eligible, jobEscapesClasses(s.job)
}

// numDimensions is how many resource dimensions exhaustion is counted by;
// dimension names them.
const numDimensions = 5

func dimension(i int) string {
	switch i {
	case 0:
		return fit.DimensionCPU
	case 1:
		return fit.DimensionMemory
	case 2:
		return fit.DimensionDisk
	case 3:
		return fit.DimensionPorts
	}
	return fit.DimensionIP
}

// selectMetrics counts what one selection saw.
type selectMetrics struct {
	evaluated, filtered, exhausted int32
	// filteredBy counts per feasibility code; exhaustedBy per dimension.
	filteredBy  []int32
	exhaustedBy [numDimensions]int32
}

func (m *selectMetrics) reset() {
	filteredBy := m.filteredBy
	clear(filteredBy)
	*m = selectMetrics{filteredBy: filteredBy}
}

func (m *selectMetrics) clone() *selectMetrics {
	c := *m
	c.filteredBy = append([]int32(nil), m.filteredBy...)
	return &c
}

// add sums o into m.
func (m *selectMetrics) add(o *selectMetrics) {
	m.evaluated += o.evaluated
	m.filtered += o.filtered
	m.exhausted += o.exhausted
	if len(o.filteredBy) > len(m.filteredBy) {
		m.filteredBy = append(m.filteredBy, make([]int32, len(o.filteredBy)-len(m.filteredBy))...)
	}
	for code, n := range o.filteredBy {
		m.filteredBy[code] += n
	}
	for i, n := range o.exhaustedBy {
		m.exhaustedBy[i] += n
	}
}

func (m *selectMetrics) filter(code uint16) {
	m.filtered++
	if int(code) >= len(m.filteredBy) {
		m.filteredBy = append(m.filteredBy, make([]int32, int(code)+1-len(m.filteredBy))...)
	}
	m.filteredBy[code]++
}

func (m *selectMetrics) exhaust(dim string) {
	m.exhausted++
	for i := range numDimensions {
		if dimension(i) == dim {
			m.exhaustedBy[i]++
			return
		}
	}
}
