package acl

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		glob, id string
		want     bool
	}{
		// exact
		{"web", "web", true},
		{"web", "web1", false},
		{"web", "we", false},
		{"web", "", false},
		// everything
		{"*", "web", true},
		{"*", "", true},
		{"***", "x", true},
		// prefix
		{"web-*", "web-1", true},
		{"web-*", "web-", true},
		{"web-*", "web", false},
		{"web-*", "api-web-1", false},
		// suffix
		{"*-canary", "web-canary", true},
		{"*-canary", "-canary", true},
		{"*-canary", "web-canary-2", false},
		// middle
		{"web-*-eu", "web-api-eu", true},
		{"web-*-eu", "web--eu", true},
		{"web-*-eu", "web-eu", false}, // prefix and suffix would overlap
		{"a*a", "a", false},
		{"a*a", "aa", true},
		// several stars
		{"*web*", "web", true},
		{"*web*", "my-web-app", true},
		{"*web*", "we-b", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "acb", false},
		{"a*b*b*c", "abbc", true},
		{"a*b*b*c", "abc", false},
		{"*a*a*", "banana", true},
		{"*a*a*a*a*", "banana", false},
		{"a**b", "ab", true},
		{"a**b", "axxb", true},
		// the characters of ids are literal
		{"web.1", "webx1", false},
		{"web_*", "web_1", true},
		// empty
		{"", "", true},
		{"", "a", false},
	} {
		if got := matchGlob(tc.glob, tc.id); got != tc.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tc.glob, tc.id, got, tc.want)
		}
	}
}

// TestMatchGlobAgainstRegexp checks the split matcher against a regexp on
// random globs and ids over a small alphabet, where partial matches abound.
func TestMatchGlobAgainstRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(alphabet string, n int) string {
		b := make([]byte, rng.IntN(n+1))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		glob, id := word("ab*", 8), word("ab", 10)
		parts := strings.Split(glob, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		if got, want := matchGlob(glob, id), re.MatchString(id); got != want {
			t.Fatalf("matchGlob(%q, %q) = %v, regexp says %v", glob, id, got, want)
		}
	}
}

func TestCheckGlob(t *testing.T) {
	for _, tc := range []struct {
		glob string
		ok   bool
	}{
		{"*", true},
		{"web-*", true},
		{"Web_1.2-*x*", true},
		{"**", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"web?", false},
		{"web/1", false},
		{"web 1", false},
		{"wéb", false},
		{"[a-z]*", false},
	} {
		if why := checkGlob(tc.glob); (why == "") != tc.ok {
			t.Errorf("checkGlob(%q) = %q, want ok %v", tc.glob, why, tc.ok)
		}
	}
}

func TestNormalizeGlob(t *testing.T) {
	for in, want := range map[string]string{
		"a*b":   "a*b",
		"a**b":  "a*b",
		"***":   "*",
		"**a**": "*a*",
		"":      "",
	} {
		if got := normalizeGlob(in); got != want {
			t.Errorf("normalizeGlob(%q) = %q, want %q", in, got, want)
		}
	}
}
