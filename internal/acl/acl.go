package acl

// Access is a level of access: AccessNone < AccessRead < AccessWrite.
type Access int

// Levels of access.
const (
	AccessNone Access = iota
	AccessRead
	AccessWrite
)

func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	}
	return "none"
}

// grant is one merged rule: a glob (for scoped resources) and what it
// says.
type grant struct {
	glob  glob
	deny  bool
	level Access
}

// ACL is what a token may do: the merge of its policies. It is immutable
// and safe for concurrent use. A nil ACL grants nothing.
type ACL struct {
	management bool
	grants     map[Resource][]grant
}

var management = &ACL{management: true}

// Management is the ACL of a management token: everything is allowed.
func Management() *ACL { return management }

// New merges policies into one ACL (see the package comment). With no
// policies it grants nothing.
func New(policies ...*Policy) *ACL {
	a := &ACL{grants: map[Resource][]grant{}}
	for _, p := range policies {
		if p == nil {
			continue
		}
		for _, r := range p.Rules {
			g := grant{glob: compileGlob(r.Glob), deny: r.Disposition == DispositionDeny}
			switch r.Disposition {
			case DispositionRead:
				g.level = AccessRead
			case DispositionWrite:
				g.level = AccessWrite
			}
			a.grants[r.Resource] = append(a.grants[r.Resource], g)
		}
	}
	return a
}

// IsManagement reports whether a allows everything.
func (a *ACL) IsManagement() bool { return a != nil && a.management }

// Allow reports whether a grants access on an unscoped resource or, for a
// scoped one, on at least one job id: the admission test of calls whose
// answers are then filtered with AllowJob. A deny anywhere on an
// unscoped resource, or on "*" of a scoped one, refuses.
func (a *ACL) Allow(r Resource, access Access) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	allowed := false
	for _, g := range a.grants[r] {
		if g.deny && (!r.Scoped() || g.glob.all) {
			return false
		}
		if !g.deny && g.level >= access {
			allowed = true
		}
	}
	return allowed
}

// AllowJob reports whether a grants access on scoped resource r for the
// job jobID: every rule whose glob matches counts, a deny wins. For an
// unscoped resource it is Allow.
func (a *ACL) AllowJob(r Resource, jobID string, access Access) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	if !r.Scoped() {
		return a.Allow(r, access)
	}
	best := AccessNone
	for _, g := range a.grants[r] {
		if !g.glob.match(jobID) {
			continue
		}
		if g.deny {
			return false
		}
		best = max(best, g.level)
	}
	return access > AccessNone && best >= access
}
