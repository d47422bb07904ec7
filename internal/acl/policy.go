package acl

import "strconv"

// Access is a level of access. Levels are ordered, AccessNone < AccessRead <
// AccessWrite, so a grant of one level covers every lower one.
type Access int

// The levels of access.
const (
	AccessNone Access = iota
	AccessRead
	AccessWrite
)

// String returns "none", "read" or "write".
func (a Access) String() string {
	switch a {
	case AccessNone:
		return "none"
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	}
	return "Access(" + strconv.Itoa(int(a)) + ")"
}

// valid reports whether a is a level a caller may ask for. AccessNone is not:
// asking for nothing is a caller's mistake, and checks fail closed on it.
func (a Access) valid() bool {
	return a == AccessRead || a == AccessWrite
}

// Resource is what a rule governs.
type Resource string

// The resources. The string values are the block types of the rules text.
const (
	ResourceJob        Resource = "job"
	ResourceAllocation Resource = "allocation" // allocations and evaluations
	ResourceDeployment Resource = "deployment"
	ResourceNode       Resource = "node"
	ResourceEvent      Resource = "event"
	ResourceOperator   Resource = "operator"
	ResourceACL        Resource = "acl"
)

// numResources is the number of resources; compiled ACLs index arrays by
// Resource.index so that a check costs no map lookup.
const numResources = 7

// index returns r's position in Resources, or -1 when r is unknown. A switch
// rather than a map: it is on the path of every check.
func (r Resource) index() int {
	switch r {
	case ResourceJob:
		return 0
	case ResourceAllocation:
		return 1
	case ResourceDeployment:
		return 2
	case ResourceNode:
		return 3
	case ResourceEvent:
		return 4
	case ResourceOperator:
		return 5
	case ResourceACL:
		return 6
	}
	return -1
}

// Scoped reports whether rules on r carry a job-id glob: true for jobs,
// allocations and deployments, which all belong to a job.
func (r Resource) Scoped() bool {
	return r == ResourceJob || r == ResourceAllocation || r == ResourceDeployment
}

// Resources lists every resource, in a fixed order (scoped ones first).
func Resources() []Resource {
	// A fresh slice each call, so no caller can change another's view.
	return []Resource{
		ResourceJob, ResourceAllocation, ResourceDeployment,
		ResourceNode, ResourceEvent, ResourceOperator, ResourceACL,
	}
}

// Disposition is what a rule says: "deny", "read" or "write".
type Disposition string

// The dispositions a rule may have.
const (
	DispositionDeny  Disposition = "deny"
	DispositionRead  Disposition = "read"
	DispositionWrite Disposition = "write"
)

// grant returns the access a disposition grants and whether it denies. An
// unknown disposition (only possible in a Policy built by hand) denies, so
// that a mistake fails closed.
func (d Disposition) grant() (access Access, deny bool) {
	switch d {
	case DispositionRead:
		return AccessRead, false
	case DispositionWrite:
		return AccessWrite, false
	}
	return AccessNone, true
}

// known reports whether d is one of the three dispositions.
func (d Disposition) known() bool {
	return d == DispositionDeny || d == DispositionRead || d == DispositionWrite
}

// Rule is one block of a policy.
type Rule struct {
	Resource Resource
	// Glob is the job-id glob of a scoped resource: "*" when the block had
	// no label (New also reads "" as "*"). It is "" for unscoped resources.
	Glob        string
	Disposition Disposition
}

// Policy is a parsed, validated rules text.
type Policy struct {
	// Rules are the blocks of the text, in source order.
	Rules []Rule
}
