package acl

import (
	"slices"
	"testing"
)

// FuzzParse checks that Parse never panics, that what it accepts is well
// formed, and that it is deterministic.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.hcl))
		f.Add([]byte(tc.json))
	}
	for _, tc := range parseErrorCases {
		f.Add([]byte(tc.src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse("fuzz.hcl", src)
		if err != nil {
			if p != nil {
				t.Fatalf("Parse returned a policy with error %v", err)
			}
			return
		}
		if len(p.Rules) == 0 {
			t.Fatal("Parse accepted a policy without rules")
		}
		for _, r := range p.Rules {
			if r.Resource.index() < 0 {
				t.Fatalf("rule with unknown resource %q", r.Resource)
			}
			if !r.Disposition.known() {
				t.Fatalf("rule with unknown disposition %q", r.Disposition)
			}
			if r.Resource.Scoped() {
				if why := checkGlob(r.Glob); why != "" {
					t.Fatalf("rule with glob %q that %s", r.Glob, why)
				}
			} else if r.Glob != "" {
				t.Fatalf("unscoped rule with glob %q", r.Glob)
			}
		}
		again, err := Parse("fuzz.hcl", src)
		if err != nil {
			t.Fatalf("second Parse failed: %v", err)
		}
		if !slices.Equal(p.Rules, again.Rules) {
			t.Fatalf("second Parse differs:\n%v\n%v", p.Rules, again.Rules)
		}
		// What parses must compile and answer without panicking.
		a := New(p)
		for _, r := range Resources() {
			a.Allow(r, AccessRead)
			a.AllowJob(r, "web", AccessWrite)
		}
	})
}
