package acl

import "strings"

// maxGlobLen matches the longest job id drover accepts (proto/drover/v1's
// maxNameLen): a longer glob without '*' could match nothing.
const maxGlobLen = 128

// checkGlob returns why s is not a valid job-id glob, or "" when it is. The
// characters are those of job ids (letters, digits, '_', '.', '-') plus '*'.
func checkGlob(s string) string {
	if s == "" {
		return "is empty"
	}
	if len(s) > maxGlobLen {
		return "is longer than 128 characters"
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '.', c == '-', c == '*':
		default:
			return "may contain only letters, digits, '_', '.', '-' and '*'"
		}
	}
	return ""
}

// glob is a job-id glob split at its stars once, when an ACL is compiled, so
// that matching needs no parsing and no allocation.
type glob struct {
	prefix string   // before the first '*'
	suffix string   // after the last '*'
	middle []string // the non-empty runs between stars, in order
	minLen int      // len(prefix) + len(suffix) + the lengths of middle
}

// globKind says which fast path, if any, a glob takes.
type globKind int

const (
	globExact   globKind = iota // no '*': equality
	globAll                     // only stars: matches everything
	globPattern                 // anything else
)

// normalizeGlob collapses runs of '*' into one, so that globs which match the
// same ids ("a**b", "a*b") merge into one entry of a compiled ACL.
func normalizeGlob(s string) string {
	if !strings.Contains(s, "**") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '*' && i > 0 && s[i-1] == '*' {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// classifyGlob returns s's kind and, for a pattern, its split form.
func classifyGlob(s string) (globKind, glob) {
	if !strings.Contains(s, "*") {
		return globExact, glob{}
	}
	if strings.Trim(s, "*") == "" {
		return globAll, glob{}
	}
	parts := strings.Split(s, "*")
	g := glob{prefix: parts[0], suffix: parts[len(parts)-1]}
	g.minLen = len(g.prefix) + len(g.suffix)
	for _, p := range parts[1 : len(parts)-1] {
		if p != "" {
			g.middle = append(g.middle, p)
			g.minLen += len(p)
		}
	}
	return globPattern, g
}

// match reports whether s matches the glob. Taking each middle run at its
// leftmost place after the previous one is enough: with '*' the only
// wildcard, an earlier place never rules out a later run.
func (g *glob) match(s string) bool {
	if len(s) < g.minLen || !strings.HasPrefix(s, g.prefix) || !strings.HasSuffix(s, g.suffix) {
		return false
	}
	rest := s[len(g.prefix) : len(s)-len(g.suffix)]
	for _, m := range g.middle {
		i := strings.Index(rest, m)
		if i < 0 {
			return false
		}
		rest = rest[i+len(m):]
	}
	return true
}

// matchGlob reports whether s matches the glob pattern. It compiles the
// glob on every call; compiled ACLs use glob.match instead.
func matchGlob(pattern, s string) bool {
	switch kind, g := classifyGlob(normalizeGlob(pattern)); kind {
	case globExact:
		return pattern == s
	case globAll:
		return true
	default:
		return g.match(s)
	}
}
