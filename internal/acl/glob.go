package acl

import "strings"

// glob matches job ids: '*' stands for any run of characters. It is split
// once, so that a match allocates nothing.
type glob struct {
	// all is "*": everything matches.
	all bool
	// parts are the literal pieces between the stars; leading and
	// trailing tell whether a star starts and ends the glob.
	parts    []string
	leading  bool
	trailing bool
}

func compileGlob(s string) glob {
	if s == "" || s == "*" {
		return glob{all: true}
	}
	g := glob{leading: strings.HasPrefix(s, "*"), trailing: strings.HasSuffix(s, "*")}
	for _, p := range strings.Split(s, "*") {
		if p != "" {
			g.parts = append(g.parts, p)
		}
	}
	if len(g.parts) == 0 {
		return glob{all: true}
	}
	return g
}

// match reports whether id matches the glob.
func (g glob) match(id string) bool {
	if g.all {
		return true
	}
	parts := g.parts
	if !g.leading {
		if !strings.HasPrefix(id, parts[0]) {
			return false
		}
		id = id[len(parts[0]):]
		parts = parts[1:]
		if len(parts) == 0 {
			return g.trailing || id == ""
		}
	}
	// Each middle part is taken at its first occurrence (leftmost is
	// never worse for a later match); the last must end the id unless a
	// star follows it.
	for i, p := range parts {
		last := i == len(parts)-1
		if last && !g.trailing {
			return len(id) >= len(p) && strings.HasSuffix(id, p)
		}
		j := strings.Index(id, p)
		if j < 0 {
			return false
		}
		id = id[j+len(p):]
	}
	return true
}
