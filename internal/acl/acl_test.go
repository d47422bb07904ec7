package acl

import (
	"strings"
	"testing"
)

func mustParse(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := Parse("test.hcl", []byte(src))
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	return p
}

func TestParse(t *testing.T) {
	hclSrc := `
job "web-*" { policy = "write" }
job "*" { policy = "read" }
allocation "web-*" { policy = "read" }
node { policy = "deny" }
acl { policy = "read" }
`
	jsonSrc := `{"job": {"web-*": {"policy": "write"}, "*": {"policy": "read"}},
 "allocation": {"web-*": {"policy": "read"}}, "node": {"policy": "deny"}, "acl": {"policy": "read"}}`
	want := []Rule{
		{ResourceJob, "web-*", DispositionWrite},
		{ResourceJob, "*", DispositionRead},
		{ResourceAllocation, "web-*", DispositionRead},
		{ResourceNode, "", DispositionDeny},
		{ResourceACL, "", DispositionRead},
	}
	for name, src := range map[string]string{"hcl": hclSrc, "json": jsonSrc} {
		p := mustParse(t, src)
		if len(p.Rules) != len(want) {
			t.Fatalf("%s: rules %v, want %v", name, p.Rules, want)
		}
		got := map[Rule]bool{}
		for _, r := range p.Rules {
			got[r] = true
		}
		for _, r := range want {
			if !got[r] {
				t.Errorf("%s: rule %v missing from %v", name, r, p.Rules)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"empty", "  \n", "no rules"},
		{"unknown block", "node { policy = \"read\" }\nquota { policy = \"read\" }", "test.hcl:2,1-6"},
		{"unknown policy", "node {\n  policy = \"admin\"\n}", `test.hcl:2,12-19: node block: unknown policy "admin"`},
		{"missing policy", "event {\n}", `test.hcl:1,7-7: Missing required argument: The argument "policy" is required`},
		{"extra attribute", "node {\n policy = \"read\"\n level = 2\n}", "test.hcl:3,2-7"},
		{"label on node", "node \"x\" { policy = \"read\" }", "test.hcl:1,6-9"},
		{"no label on job", "job { policy = \"read\" }", "test.hcl:1,5"},
		{"bad glob", "job \"a/b\" { policy = \"read\" }", `test.hcl:1,5-10: job block: glob "a/b"`},
		{"duplicate", "job \"a\" { policy = \"read\" }\njob \"a\" { policy = \"write\" }", `test.hcl:2,1-8: duplicate job block "a"`},
		{"not a string", "node { policy = 3 }", "test.hcl:1,8-18: node block: policy must be a string"},
		{"syntax", "node { policy = }", "test.hcl:1,17"},
		{"json unknown policy", "{\"node\": {\"policy\": \"x\"}}", `test.hcl:1,21-24: node block: unknown policy "x"`},
		{"nested block", "node {\n policy = \"read\"\n x {}\n}", "test.hcl:3,2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.hcl", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.src, err, tc.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	type check struct {
		r      Resource
		job    string
		access Access
		want   bool
	}
	for _, tc := range []struct {
		name     string
		policies []string
		checks   []check
	}{
		{"no policies", nil, []check{{ResourceNode, "", AccessRead, false}, {ResourceJob, "a", AccessRead, false}}},
		{"write implies read", []string{`node { policy = "write" }`}, []check{
			{ResourceNode, "", AccessRead, true}, {ResourceNode, "", AccessWrite, true}, {ResourceOperator, "", AccessRead, false}}},
		{"union of policies", []string{`node { policy = "read" }`, `node { policy = "write" }`}, []check{
			{ResourceNode, "", AccessWrite, true}}},
		{"deny wins across policies", []string{`node { policy = "write" }`, `node { policy = "deny" }`}, []check{
			{ResourceNode, "", AccessRead, false}}},
		{"glob and exact both apply", []string{`job "*" { policy = "read" }`, `job "web" { policy = "write" }`}, []check{
			{ResourceJob, "web", AccessWrite, true}, {ResourceJob, "db", AccessWrite, false}, {ResourceJob, "db", AccessRead, true}}},
		{"exact deny beats glob grant", []string{`job "*" { policy = "write" }`, `job "secret" { policy = "deny" }`}, []check{
			{ResourceJob, "secret", AccessRead, false}, {ResourceJob, "web", AccessWrite, true}}},
		{"glob deny beats exact grant", []string{`job "web" { policy = "write" }`, `job "w*" { policy = "deny" }`}, []check{
			{ResourceJob, "web", AccessRead, false}}},
		{"no matching glob", []string{`job "web-*" { policy = "write" }`}, []check{
			{ResourceJob, "db", AccessRead, false}, {ResourceJob, "web-1", AccessWrite, true}}},
		{"resources are separate", []string{`job "*" { policy = "write" }`}, []check{
			{ResourceAllocation, "a", AccessRead, false}, {ResourceDeployment, "a", AccessRead, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*Policy
			for _, src := range tc.policies {
				ps = append(ps, mustParse(t, src))
			}
			a := New(ps...)
			for _, c := range tc.checks {
				if got := a.AllowJob(c.r, c.job, c.access); got != c.want {
					t.Errorf("AllowJob(%s, %q, %s) = %v, want %v", c.r, c.job, c.access, got, c.want)
				}
			}
		})
	}
}

func TestAllowAdmission(t *testing.T) {
	for _, tc := range []struct {
		src  string
		r    Resource
		want bool
	}{
		{`job "web-*" { policy = "read" }`, ResourceJob, true},
		{"job \"web-*\" { policy = \"read\" }\njob \"*\" { policy = \"deny\" }", ResourceJob, false},
		{"job \"web-*\" { policy = \"read\" }\njob \"db\" { policy = \"deny\" }", ResourceJob, true},
		{`node { policy = "deny" }`, ResourceNode, false},
		{`event { policy = "read" }`, ResourceNode, false},
	} {
		if got := New(mustParse(t, tc.src)).Allow(tc.r, AccessRead); got != tc.want {
			t.Errorf("Allow(%s, read) with %q = %v, want %v", tc.r, tc.src, got, tc.want)
		}
	}
	var nilACL *ACL
	if nilACL.Allow(ResourceNode, AccessRead) || nilACL.AllowJob(ResourceJob, "a", AccessRead) || nilACL.IsManagement() {
		t.Error("a nil ACL grants something")
	}
	if !Management().AllowJob(ResourceJob, "x", AccessWrite) || !Management().Allow(ResourceACL, AccessWrite) {
		t.Error("the management ACL refuses something")
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		glob, id string
		want     bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"web", "web", true},
		{"web", "web2", false},
		{"web-*", "web-1", true},
		{"web-*", "web-", true},
		{"web-*", "db-1", false},
		{"*-api", "pay-api", true},
		{"*-api", "pay-api2", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "a-b-c", true},
		{"a*b*c", "a-c-b", false},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"**x**", "yxy", true},
		{"*b*", "abc", true},
		{"*b*", "ac", false},
	} {
		if got := compileGlob(tc.glob).match(tc.id); got != tc.want {
			t.Errorf("glob %q on %q = %v, want %v", tc.glob, tc.id, got, tc.want)
		}
	}
}

func BenchmarkAllowJob(b *testing.B) {
	p, err := Parse("b.hcl", []byte("job \"web-*\" { policy = \"write\" }\njob \"*\" { policy = \"read\" }\njob \"secret-*\" { policy = \"deny\" }"))
	if err != nil {
		b.Fatal(err)
	}
	a := New(p)
	b.ReportAllocs()
	for b.Loop() {
		if !a.AllowJob(ResourceJob, "web-frontend", AccessWrite) {
			b.Fatal("refused")
		}
	}
}
