package acl

// ACL is the merge of a token's policies, compiled for fast checks. It is
// immutable once built, and so safe for concurrent use. A nil *ACL grants
// nothing.
type ACL struct {
	management bool
	// unscoped holds the merged access of each unscoped resource.
	unscoped [numResources]Access
	// scoped holds the compiled rules of each scoped resource; nil when
	// the resource has no rules.
	scoped [numResources]*scopedRules
	// admit is the highest access Allow grants on each resource.
	admit [numResources]Access
}

// verdict is the merge of every rule on one glob (or one resource).
type verdict struct {
	deny   bool
	access Access // highest granted; meaningless when deny is set
}

func (v *verdict) add(d Disposition) {
	access, deny := d.grant()
	v.deny = v.deny || deny
	v.access = max(v.access, access)
}

// result is the access the verdict leaves: none when denied.
func (v verdict) result() Access {
	if v.deny {
		return AccessNone
	}
	return v.access
}

// scopedRules are the rules of one scoped resource, grouped so that a check
// for a job id looks up its exact rules in a map and matches only the globs
// that have a wildcard.
type scopedRules struct {
	// all is the merge of the rules on "*", which match every job id.
	all verdict
	// exact maps a job id named by a glob without '*' to its full result:
	// the ids are known in advance, so every other glob is matched against
	// them once, when the ACL is built.
	exact map[string]Access
	// patterns are the other globs; a job id not in exact is matched
	// against each of them.
	patterns []pattern
}

type pattern struct {
	glob
	verdict
}

// New merges policies into one ACL; nil policies are skipped. The merge is
// described in the package documentation: every matching rule applies, a deny
// wins, and otherwise the highest grant does. With no policies, or no rules,
// the ACL grants nothing. Rules on unknown resources are ignored.
func New(policies ...*Policy) *ACL {
	a := &ACL{}
	var unscoped [numResources]verdict
	var byGlob [numResources]map[string]*verdict
	var order [numResources][]string // globs in first-seen order, for a deterministic build
	for _, p := range policies {
		if p == nil {
			continue
		}
		for _, r := range p.Rules {
			i := r.Resource.index()
			if i < 0 {
				continue
			}
			if !r.Resource.Scoped() {
				unscoped[i].add(r.Disposition)
				continue
			}
			g := r.Glob
			if g == "" {
				g = "*"
			}
			g = normalizeGlob(g)
			if byGlob[i] == nil {
				byGlob[i] = make(map[string]*verdict)
			}
			v, ok := byGlob[i][g]
			if !ok {
				v = &verdict{}
				byGlob[i][g] = v
				order[i] = append(order[i], g)
			}
			v.add(r.Disposition)
		}
	}
	for i, r := range Resources() {
		if !r.Scoped() {
			a.unscoped[i] = unscoped[i].result()
			a.admit[i] = a.unscoped[i]
			continue
		}
		if len(order[i]) > 0 {
			a.scoped[i], a.admit[i] = compileScoped(order[i], byGlob[i])
		}
	}
	return a
}

// compileScoped builds the rules of one scoped resource from its merged
// globs, and returns with them the highest access Allow admits.
func compileScoped(globs []string, byGlob map[string]*verdict) (*scopedRules, Access) {
	s := &scopedRules{}
	var exact []string
	for _, g := range globs {
		v := *byGlob[g]
		switch kind, split := classifyGlob(g); kind {
		case globAll:
			s.all = v
		case globExact:
			exact = append(exact, g)
		default:
			s.patterns = append(s.patterns, pattern{glob: split, verdict: v})
		}
	}
	if s.all.deny {
		// Every job id is denied; nothing else needs keeping.
		return &scopedRules{all: s.all}, AccessNone
	}
	admit := s.all.access
	for _, p := range s.patterns {
		if !p.deny {
			admit = max(admit, p.access)
		}
	}
	// A pattern that grants no more than "*" already does cannot change a
	// result; only denies and higher grants are worth matching.
	kept := s.patterns[:0]
	for _, p := range s.patterns {
		if p.deny || p.access > s.all.access {
			kept = append(kept, p)
		}
	}
	s.patterns = kept
	if len(exact) > 0 {
		s.exact = make(map[string]Access, len(exact))
		for _, id := range exact {
			v := s.all
			v.deny = v.deny || byGlob[id].deny
			v.access = max(v.access, byGlob[id].access)
			s.exact[id] = s.matchPatterns(id, v).result()
			admit = max(admit, s.exact[id])
		}
	}
	return s, admit
}

// matchPatterns merges into v the patterns that match id.
func (s *scopedRules) matchPatterns(id string, v verdict) verdict {
	for i := range s.patterns {
		p := &s.patterns[i]
		// A grant no higher than what v holds cannot change the result,
		// so only such patterns skip the match.
		if (p.deny || p.access > v.access) && p.match(id) {
			if p.deny {
				return verdict{deny: true}
			}
			v.access = p.access
		}
	}
	return v
}

// access returns the access the rules leave on the job id.
func (s *scopedRules) access(id string) Access {
	if s.all.deny {
		return AccessNone
	}
	if a, ok := s.exact[id]; ok {
		return a
	}
	if len(s.patterns) == 0 {
		return s.all.access
	}
	return s.matchPatterns(id, s.all).result()
}

// Management returns an ACL that allows everything, for management tokens.
func Management() *ACL {
	return &ACL{management: true}
}

// IsManagement reports whether a is a management ACL.
func (a *ACL) IsManagement() bool {
	return a != nil && a.management
}

// Allow reports whether the ACL grants access on an unscoped resource or, for
// a scoped resource, on at least one job id. For scoped resources it is the
// admission test of calls that span jobs, whose results are then filtered
// with AllowJob; it may admit where AllowJob refuses every job, never the
// reverse. A deny on "*" makes it false.
func (a *ACL) Allow(r Resource, access Access) bool {
	i := r.index()
	if a == nil || i < 0 || !access.valid() {
		return false
	}
	return a.management || a.admit[i] >= access
}

// AllowJob reports whether the ACL grants access on scoped resource r for the
// job jobID: the per-object test. For an unscoped resource it is
// Allow(r, access).
func (a *ACL) AllowJob(r Resource, jobID string, access Access) bool {
	i := r.index()
	if a == nil || i < 0 || !access.valid() {
		return false
	}
	if a.management {
		return true
	}
	if !r.Scoped() {
		return a.unscoped[i] >= access
	}
	s := a.scoped[i]
	if s == nil {
		return false
	}
	return s.access(jobID) >= access
}
