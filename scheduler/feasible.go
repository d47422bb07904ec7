package scheduler

import (
	"slices"
	"strconv"
	"strings"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Reasons a node is filtered, as PlacementFailure.filtered_by names them.
// A constraint that fails is named by its text ("rack regexp ^r1$").
const (
	reasonNotReady      = "not ready"
	reasonIneligible    = "ineligible"
	reasonDraining      = "draining"
	reasonDatacenter    = "datacenter"
	reasonDistinctHosts = "distinct_hosts"
)

// Node fields constraints and spreads can name besides the attributes.
const (
	attrDatacenter = "node.datacenter"
	attrClass      = "node.class"
	attrName       = "node.name"
	attrID         = "node.id"
)

// nodeUnavailable returns why a node takes no new work, or "".
func nodeUnavailable(n *droverv1.Node) string {
	switch {
	case n.GetStatus() != droverv1.NodeStatus_NODE_STATUS_READY:
		return reasonNotReady
	case n.GetSchedulingEligibility() == droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE:
		return reasonIneligible
	case n.GetDrainStrategy() != nil:
		return reasonDraining
	}
	return ""
}

// nodeAttribute returns the value of a node field or attribute named by a
// constraint or spread, and whether the node has it.
func nodeAttribute(n *droverv1.Node, name string) (string, bool) {
	switch name {
	case attrDatacenter:
		return n.GetDatacenter(), true
	case attrClass:
		return n.GetNodeClass(), true
	case attrName:
		return n.GetName(), true
	case attrID:
		return n.GetId(), true
	}
	v, ok := n.GetAttributes()[name]
	return v, ok
}

// classCapturable reports whether a constraint's outcome is the same for
// every node of a computed class: it reads the datacenter, the node class
// or attributes, not the node's identity or its allocations.
func classCapturable(c *droverv1.Constraint) bool {
	if c.GetOperator() == droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS {
		return false
	}
	return c.GetAttribute() != attrID && c.GetAttribute() != attrName
}

// jobEscapesClasses reports whether any of the job's constraints is not
// class-capturable, so that a blocked evaluation cannot rely on node
// classes alone.
func jobEscapesClasses(job *droverv1.Job) bool {
	for _, c := range job.GetConstraints() {
		if !classCapturable(c) {
			return true
		}
	}
	for _, tg := range job.GetTaskGroups() {
		for _, c := range tg.GetConstraints() {
			if !classCapturable(c) {
				return true
			}
		}
	}
	return false
}

// constraintCheck is a constraint prepared for testing many nodes.
type constraintCheck struct {
	attribute string
	op        droverv1.ConstraintOperator
	value     string
	// text names the constraint in placement failures.
	text string
	// matches is the compiled regexp test; nil for an invalid expression,
	// which no node satisfies.
	matches func(string) bool
	// valueInt is value as an integer, when it is one.
	valueInt   int64
	valueIsInt bool
	// elems are value's elements for set_contains.
	elems []string
}

func newConstraintCheck(ctx *evalContext, c *droverv1.Constraint) constraintCheck {
	cc := constraintCheck{
		attribute: c.GetAttribute(),
		op:        c.GetOperator(),
		value:     c.GetValue(),
		text:      constraintText(c),
	}
	cc.valueInt, cc.valueIsInt = parseInt(cc.value)
	switch cc.op {
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP:
		if re, err := ctx.compileRegexp(cc.value); err == nil {
			cc.matches = re.MatchString
		}
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_SET_CONTAINS:
		cc.elems = splitSet(cc.value)
	}
	return cc
}

// operatorSymbol is how operators write a constraint operator.
func operatorSymbol(op droverv1.ConstraintOperator) string {
	switch op {
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL:
		return "="
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_NOT_EQUAL:
		return "!="
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_LESS_THAN:
		return "<"
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_LESS_THAN_OR_EQUAL:
		return "<="
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_GREATER_THAN:
		return ">"
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_GREATER_THAN_OR_EQUAL:
		return ">="
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP:
		return "regexp"
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_SET_CONTAINS:
		return "set_contains"
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_SET:
		return "is_set"
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_NOT_SET:
		return "is_not_set"
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS:
		return "distinct_hosts"
	}
	return op.String()
}

// constraintText renders a constraint the way operators wrote it.
func constraintText(c *droverv1.Constraint) string {
	op := operatorSymbol(c.GetOperator())
	switch c.GetOperator() {
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS:
		return op
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_SET, droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_NOT_SET:
		return c.GetAttribute() + " " + op
	}
	return c.GetAttribute() + " " + op + " " + c.GetValue()
}

// satisfied tests the constraint against a node. A missing attribute
// satisfies only is_not_set and !=.
func (cc *constraintCheck) satisfied(n *droverv1.Node) bool {
	v, found := nodeAttribute(n, cc.attribute)
	switch cc.op {
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_SET:
		return found
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_IS_NOT_SET:
		return !found
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_NOT_EQUAL:
		return !found || v != cc.value
	}
	if !found {
		return false
	}
	switch cc.op {
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL:
		return v == cc.value
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_LESS_THAN:
		return cc.compare(v) < 0
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_LESS_THAN_OR_EQUAL:
		return cc.compare(v) <= 0
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_GREATER_THAN:
		return cc.compare(v) > 0
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_GREATER_THAN_OR_EQUAL:
		return cc.compare(v) >= 0
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP:
		return cc.matches != nil && cc.matches(v)
	case droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_SET_CONTAINS:
		have := splitSet(v)
		for _, e := range cc.elems {
			if !slices.Contains(have, e) {
				return false
			}
		}
		return true
	}
	return false
}

// compare orders the node's value against the constraint's: as integers
// when both are integers, else as text.
func (cc *constraintCheck) compare(v string) int {
	if cc.valueIsInt {
		if n, ok := parseInt(v); ok {
			switch {
			case n < cc.valueInt:
				return -1
			case n > cc.valueInt:
				return 1
			}
			return 0
		}
	}
	return strings.Compare(v, cc.value)
}

func parseInt(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n, err == nil
}

// splitSet splits a comma-separated list, trimming spaces and dropping
// empty elements.
func splitSet(s string) []string {
	var out []string
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Feasibility codes cached per node: not yet checked, feasible, or
// codeFirstReason plus the index of the reason the node was filtered for.
const (
	codeUnknown uint16 = iota
	codeFeasible
	codeFirstReason
)

// feasibility decides which nodes one task group may use, ignoring
// resources and distinct_hosts (which depend on the plan). Results are
// cached per node, and for the class-capturable part per computed class,
// so each constraint runs once per class and pass rather than per node and
// placement.
type feasibility struct {
	datacenters []string
	// classChecks read only what a computed class captures; nodeChecks
	// read the node's identity and run per node.
	classChecks []constraintCheck
	nodeChecks  []constraintCheck
	// distinctJob and distinctGroup say whether distinct_hosts is set on
	// the job or on the group.
	distinctJob, distinctGroup bool

	reasons    []string
	reasonCode map[string]uint16
	byNode     []uint16
	byClass    map[uint64]classResult
}

// classResult is the outcome of the class-capturable checks for one
// computed class.
type classResult struct {
	// class is the computed class (Node.ComputedClass), as blocked
	// evaluations record it.
	class string
	code  uint16
}

func newFeasibility(ctx *evalContext, job *droverv1.Job, tg *droverv1.TaskGroup) *feasibility {
	f := &feasibility{
		datacenters: job.GetDatacenters(),
		reasonCode:  make(map[string]uint16),
		byClass:     make(map[uint64]classResult),
	}
	add := func(c *droverv1.Constraint, jobLevel bool) {
		switch {
		case c.GetOperator() == droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_DISTINCT_HOSTS:
			if jobLevel {
				f.distinctJob = true
			} else {
				f.distinctGroup = true
			}
		case classCapturable(c):
			f.classChecks = append(f.classChecks, newConstraintCheck(ctx, c))
		default:
			f.nodeChecks = append(f.nodeChecks, newConstraintCheck(ctx, c))
		}
	}
	for _, c := range job.GetConstraints() {
		add(c, true)
	}
	for _, c := range tg.GetConstraints() {
		add(c, false)
	}
	return f
}

// code interns a reason.
func (f *feasibility) code(reason string) uint16 {
	if c, ok := f.reasonCode[reason]; ok {
		return c
	}
	c := codeFirstReason + uint16(len(f.reasons))
	f.reasons = append(f.reasons, reason)
	f.reasonCode[reason] = c
	return c
}

// reason returns the text of a code at or above codeFirstReason.
func (f *feasibility) reason(code uint16) string { return f.reasons[code-codeFirstReason] }

// check returns codeFeasible or the code of the reason the node is
// filtered for.
func (f *feasibility) check(ctx *evalContext, ns *nodeState) uint16 {
	if ns.index < len(f.byNode) {
		if c := f.byNode[ns.index]; c != codeUnknown {
			return c
		}
	} else {
		f.byNode = append(f.byNode, make([]uint16, ns.index+1-len(f.byNode))...)
	}
	c := f.checkNode(ctx, ns)
	f.byNode[ns.index] = c
	return c
}

func (f *feasibility) checkNode(ctx *evalContext, ns *nodeState) uint16 {
	if r := nodeUnavailable(ns.node); r != "" {
		return f.code(r)
	}
	key := ctx.classKey(ns)
	res, ok := f.byClass[key]
	if !ok {
		res = classResult{class: ns.node.ComputedClass(), code: f.checkClass(ns.node)}
		f.byClass[key] = res
	}
	if res.code != codeFeasible {
		return res.code
	}
	for i := range f.nodeChecks {
		if !f.nodeChecks[i].satisfied(ns.node) {
			return f.code(f.nodeChecks[i].text)
		}
	}
	return codeFeasible
}

// checkClass runs the checks every node of the node's class shares.
func (f *feasibility) checkClass(n *droverv1.Node) uint16 {
	if !slices.Contains(f.datacenters, n.GetDatacenter()) {
		return f.code(reasonDatacenter)
	}
	for i := range f.classChecks {
		if !f.classChecks[i].satisfied(n) {
			return f.code(f.classChecks[i].text)
		}
	}
	return codeFeasible
}

// classKey is a cheap stand-in for Node.ComputedClass within a pass: a
// hash of the same fields (datacenter, node class, attributes) that needs
// no sorting and no allocation, since it runs for every node while
// ComputedClass runs once per class. Each attribute is hashed on its own
// and the results summed, so map order does not matter.
func classKey(n *droverv1.Node) uint64 {
	key := mix64(fnvPair(n.GetDatacenter(), n.GetNodeClass()))
	for k, v := range n.GetAttributes() {
		key += mix64(fnvPair(k, v))
	}
	return key
}

// fnvPair hashes two strings with a separator, so that ("ab", "c") and
// ("a", "bc") differ.
func fnvPair(a, b string) uint64 {
	return fnv64(fnv64(fnv64(fnvOffset, a), "\x00"), b)
}

// FNV-1a, 64 bits.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv64(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix64 is splitmix64's finaliser: it spreads each hash over all bits
// before the hashes are summed.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
