package acl

import (
	"reflect"
	"slices"
	"testing"
)

// FuzzParse feeds the parser arbitrary rules text: it must never panic,
// and what it accepts must be well formed and parse the same way again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`job "web-*" { policy = "write" }`,
		`node { policy = "read" }` + "\n" + `acl { policy = "deny" }`,
		`{"job": {"*": {"policy": "read"}}, "event": {"policy": "read"}}`,
		`operator { policy = "write" }`,
		`job "a" { policy = "read" } job "a" { policy = "write" }`,
		`{"node": [{"policy": "read"}]}`,
		"node {\n policy = \"re${x}ad\"\n}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse("fuzz.hcl", src)
		if err != nil {
			return
		}
		for _, r := range p.Rules {
			if !slices.Contains(Resources(), r.Resource) {
				t.Fatalf("unknown resource %q accepted", r.Resource)
			}
			switch r.Disposition {
			case DispositionDeny, DispositionRead, DispositionWrite:
			default:
				t.Fatalf("unknown disposition %q accepted", r.Disposition)
			}
			if r.Resource.Scoped() != (r.Glob != "") {
				t.Fatalf("rule %v: glob on the wrong resource", r)
			}
		}
		again, err := Parse("fuzz.hcl", src)
		if err != nil || !reflect.DeepEqual(p, again) {
			t.Fatalf("second parse differs: %v, %v", again, err)
		}
		New(p).AllowJob(ResourceJob, "x", AccessRead)
	})
}
