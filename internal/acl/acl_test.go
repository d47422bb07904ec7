package acl

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse("test.hcl", []byte(src))
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return p
}

// check is one question to an ACL: AllowJob when job is set (or the
// resource is unscoped), Allow when it is not.
type check struct {
	r      Resource
	job    string // "" asks Allow for scoped resources
	access Access
	want   bool
}

func (c check) ask(a *ACL) bool {
	if c.r.Scoped() && c.job == "" {
		return a.Allow(c.r, c.access)
	}
	return a.AllowJob(c.r, c.job, c.access)
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policies []string
		checks   []check
	}{
		{
			name:     "union of two policies",
			policies: []string{`job "web-*" { policy = "read" }`, `node { policy = "write" }` + "\n" + `job "api" { policy = "write" }`},
			checks: []check{
				{ResourceJob, "web-1", AccessRead, true},
				{ResourceJob, "web-1", AccessWrite, false},
				{ResourceJob, "api", AccessWrite, true},
				{ResourceJob, "api-2", AccessRead, false},
				{ResourceNode, "", AccessWrite, true},
				{ResourceEvent, "", AccessRead, false},
				{ResourceJob, "", AccessWrite, true}, // Allow: "api" grants write
			},
		},
		{
			name:     "deny wins across policies",
			policies: []string{`job "*" { policy = "write" }` + "\n" + `operator { policy = "write" }`, `job "secret-*" { policy = "deny" }` + "\n" + `operator { policy = "deny" }`},
			checks: []check{
				{ResourceJob, "web", AccessWrite, true},
				{ResourceJob, "secret-db", AccessRead, false},
				{ResourceOperator, "", AccessRead, false},
				{ResourceJob, "", AccessWrite, true},
			},
		},
		{
			name:     "glob and exact both apply, deny wins",
			policies: []string{`job "web" { policy = "write" }`, `job "web*" { policy = "deny" }` + "\n" + `job "api" { policy = "deny" }`, `job "a*" { policy = "write" }`},
			checks: []check{
				{ResourceJob, "web", AccessRead, false},
				{ResourceJob, "webx", AccessRead, false},
				{ResourceJob, "api", AccessRead, false},
				{ResourceJob, "app", AccessWrite, true},
			},
		},
		{
			name:     "exact grant over a lower glob grant",
			policies: []string{`job "*" { policy = "read" }`, `job "web" { policy = "write" }`},
			checks: []check{
				{ResourceJob, "web", AccessWrite, true},
				{ResourceJob, "web2", AccessWrite, false},
				{ResourceJob, "web2", AccessRead, true},
			},
		},
		{
			name:     "write implies read",
			policies: []string{`allocation "batch-*" { policy = "write" }` + "\n" + `acl { policy = "write" }`},
			checks: []check{
				{ResourceAllocation, "batch-7", AccessRead, true},
				{ResourceAllocation, "batch-7", AccessWrite, true},
				{ResourceACL, "", AccessRead, true},
				{ResourceAllocation, "", AccessRead, true},
			},
		},
		{
			name:     "highest grant of several",
			policies: []string{`deployment "*" { policy = "read" }`, `deployment "web-*" { policy = "write" }`, `deployment "*-eu" { policy = "read" }`},
			checks: []check{
				{ResourceDeployment, "web-eu", AccessWrite, true},
				{ResourceDeployment, "api-eu", AccessWrite, false},
				{ResourceDeployment, "api-eu", AccessRead, true},
			},
		},
		{
			name:     "resources are separate",
			policies: []string{`job "*" { policy = "write" }`},
			checks: []check{
				{ResourceAllocation, "web", AccessRead, false},
				{ResourceDeployment, "web", AccessRead, false},
				{ResourceAllocation, "", AccessRead, false},
			},
		},
		{
			name:     "deny on * refuses admission too",
			policies: []string{`job "web-*" { policy = "write" }`, `job { policy = "deny" }`},
			checks: []check{
				{ResourceJob, "web-1", AccessRead, false},
				{ResourceJob, "", AccessRead, false},
			},
		},
		{
			name:     "admission is per glob; jobs are then filtered",
			policies: []string{`job "web-a*" { policy = "read" }`, `job "web-*" { policy = "deny" }`},
			checks: []check{
				{ResourceJob, "", AccessRead, true}, // Allow over-admits
				{ResourceJob, "web-api", AccessRead, false},
			},
		},
		{
			name:     "admission of an exact glob under a deny",
			policies: []string{`job "web-1" { policy = "write" }`, `job "web-*" { policy = "deny" }`},
			checks: []check{
				{ResourceJob, "", AccessRead, false},
				{ResourceJob, "web-1", AccessRead, false},
			},
		},
		{
			name:     "deny and grant on the same glob",
			policies: []string{`job "web" { policy = "read" }`, `job "web" { policy = "deny" }`},
			checks: []check{
				{ResourceJob, "web", AccessRead, false},
				{ResourceJob, "", AccessRead, false},
			},
		},
		{
			name:     "globs that match the same ids merge",
			policies: []string{`job "a**b" { policy = "write" }`, `job "a*b" { policy = "deny" }`},
			checks: []check{
				{ResourceJob, "axb", AccessRead, false},
			},
		},
		{
			name:     "no rules means no access",
			policies: []string{`node { policy = "read" }`},
			checks: []check{
				{ResourceJob, "web", AccessRead, false},
				{ResourceJob, "", AccessRead, false},
				{ResourceEvent, "", AccessRead, false},
				{ResourceOperator, "", AccessRead, false},
			},
		},
		{
			name:     "no policies grant nothing",
			policies: nil,
			checks: []check{
				{ResourceJob, "web", AccessRead, false},
				{ResourceNode, "", AccessRead, false},
			},
		},
		{
			name:     "checks fail closed",
			policies: []string{`job { policy = "write" }` + "\n" + `node { policy = "write" }`},
			checks: []check{
				{ResourceJob, "web", AccessNone, false},
				{ResourceNode, "", AccessNone, false},
				{ResourceJob, "", Access(3), false},
				{ResourceJob, "web", Access(-1), false},
				{Resource("namespace"), "", AccessRead, false},
				{Resource("namespace"), "web", AccessRead, false},
			},
		},
		{
			name:     "AllowJob on an unscoped resource is Allow",
			policies: []string{`event { policy = "read" }`},
			checks: []check{
				{ResourceEvent, "ignored", AccessRead, true},
				{ResourceEvent, "ignored", AccessWrite, false},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var policies []*Policy
			for _, src := range tc.policies {
				policies = append(policies, mustParse(t, src))
			}
			a := New(policies...)
			if a.IsManagement() {
				t.Error("IsManagement is true")
			}
			for _, c := range tc.checks {
				if got := c.ask(a); got != c.want {
					t.Errorf("%s %q %v: got %v, want %v", c.r, c.job, c.access, got, c.want)
				}
			}
		})
	}
}

func TestManagement(t *testing.T) {
	a := Management()
	if !a.IsManagement() {
		t.Error("IsManagement is false")
	}
	for _, r := range Resources() {
		for _, access := range []Access{AccessRead, AccessWrite} {
			if !a.Allow(r, access) || !a.AllowJob(r, "any", access) {
				t.Errorf("management refuses %s %v", r, access)
			}
		}
	}
	if a.Allow(ResourceJob, AccessNone) || a.Allow("namespace", AccessRead) {
		t.Error("management allows a malformed request")
	}
}

func TestNilACL(t *testing.T) {
	var a *ACL
	if a.IsManagement() {
		t.Error("nil ACL is management")
	}
	for _, r := range Resources() {
		if a.Allow(r, AccessRead) || a.AllowJob(r, "web", AccessRead) {
			t.Errorf("nil ACL allows %s", r)
		}
	}
}

func TestNewSkipsNilAndHandBuiltOddities(t *testing.T) {
	a := New(nil, &Policy{Rules: []Rule{
		{Resource: ResourceJob, Glob: "", Disposition: DispositionRead}, // "" reads as "*"
		{Resource: "namespace", Glob: "x", Disposition: DispositionWrite},
		{Resource: ResourceNode, Disposition: "admin"}, // unknown: denies
		{Resource: ResourceNode, Disposition: DispositionWrite},
	}}, nil)
	if !a.AllowJob(ResourceJob, "anything", AccessRead) {
		t.Error("an empty glob does not read as *")
	}
	if a.Allow(ResourceNode, AccessRead) {
		t.Error("an unknown disposition does not deny")
	}
}

func TestResources(t *testing.T) {
	rs := Resources()
	if len(rs) != numResources {
		t.Fatalf("%d resources, numResources is %d", len(rs), numResources)
	}
	for i, r := range rs {
		if r.index() != i {
			t.Errorf("%s has index %d, is at %d", r, r.index(), i)
		}
		wantScoped := r == ResourceJob || r == ResourceAllocation || r == ResourceDeployment
		if r.Scoped() != wantScoped {
			t.Errorf("%s.Scoped() = %v", r, r.Scoped())
		}
	}
	rs[0] = "changed"
	if Resources()[0] != ResourceJob {
		t.Error("Resources shares its slice")
	}
}

func TestAccessString(t *testing.T) {
	for a, want := range map[Access]string{AccessNone: "none", AccessRead: "read", AccessWrite: "write", 9: "Access(9)"} {
		if got := a.String(); got != want {
			t.Errorf("Access(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}

// reference answers AllowJob the slow, obvious way, straight from the
// rules, for comparison with the compiled ACL.
func reference(policies []*Policy, r Resource, id string) Access {
	var v verdict
	for _, p := range policies {
		for _, rule := range p.Rules {
			if rule.Resource == r && (!r.Scoped() || matchGlob(rule.Glob, id)) {
				v.add(rule.Disposition)
			}
		}
	}
	return v.result()
}

// TestCompiledMatchesReference builds random policies over a small set of
// globs and ids, where overlaps are common, and compares every answer of the
// compiled ACL with the reference; and checks that whatever AllowJob grants,
// Allow admits.
func TestCompiledMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	globs := []string{"*", "**", "a", "ab", "a*", "*b", "a*b", "*a*", "b*", "ba", "a**b", "*ab*"}
	ids := []string{"", "a", "b", "ab", "ba", "aab", "abb", "bab", "abab", "c"}
	dispositions := []Disposition{DispositionDeny, DispositionRead, DispositionWrite}
	for round := range 3000 {
		var policies []*Policy
		for range rng.IntN(4) {
			p := &Policy{}
			for range rng.IntN(5) {
				p.Rules = append(p.Rules, Rule{
					Resource:    Resources()[rng.IntN(numResources)],
					Glob:        globs[rng.IntN(len(globs))],
					Disposition: dispositions[rng.IntN(len(dispositions))],
				})
			}
			policies = append(policies, p)
		}
		a := New(policies...)
		for _, r := range Resources() {
			for _, id := range ids {
				want := reference(policies, r, id)
				for _, access := range []Access{AccessRead, AccessWrite} {
					got := a.AllowJob(r, id, access)
					if got != (want >= access) {
						t.Fatalf("round %d: AllowJob(%s, %q, %v) = %v, reference gives %v; policies %v",
							round, r, id, access, got, want, fmt.Sprint(rules(policies)))
					}
					if got && !a.Allow(r, access) {
						t.Fatalf("round %d: AllowJob(%s, %q, %v) but not Allow; policies %v", round, r, id, access, rules(policies))
					}
				}
			}
		}
	}
}

func rules(policies []*Policy) [][]Rule {
	var out [][]Rule
	for _, p := range policies {
		out = append(out, p.Rules)
	}
	return out
}

func TestConcurrentChecks(t *testing.T) {
	a := New(mustParse(t, `job "web-*" { policy = "write" }`+"\n"+`job "*-db" { policy = "deny" }`+"\n"+`job "api" { policy = "read" }`))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				id := fmt.Sprintf("web-%d", (g*1000+i)%7)
				if !a.AllowJob(ResourceJob, id, AccessWrite) || a.AllowJob(ResourceJob, "web-db", AccessRead) {
					t.Errorf("wrong answer for %s", id)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchACL is a token with a realistic handful of policies.
func benchACL(b testing.TB) *ACL {
	return New(
		mustParse(b, `
job "*"          { policy = "read" }
job "web-*"      { policy = "write" }
job "batch-*-eu" { policy = "write" }
job "billing"    { policy = "deny" }
allocation "*"   { policy = "read" }
node             { policy = "read" }
`),
		mustParse(b, `
job "payments-*" { policy = "deny" }
job "api"        { policy = "write" }
deployment "web-*" { policy = "write" }
`),
	)
}

func TestAllowJobDoesNotAllocate(t *testing.T) {
	a := benchACL(t)
	ids := []string{"api", "web-frontend", "batch-nightly-eu", "payments-ledger", "other", "billing"}
	allocs := testing.AllocsPerRun(100, func() {
		for _, id := range ids {
			a.AllowJob(ResourceJob, id, AccessWrite)
			a.AllowJob(ResourceAllocation, id, AccessRead)
		}
	})
	if allocs != 0 {
		t.Errorf("AllowJob allocates %v times per run", allocs)
	}
}

func BenchmarkAllowJob(b *testing.B) {
	a := benchACL(b)
	for _, bc := range []struct {
		name string
		r    Resource
		id   string
	}{
		{"exact", ResourceJob, "api"},
		{"star only", ResourceAllocation, "web-frontend"},
		{"pattern hit", ResourceJob, "web-frontend"},
		{"pattern deny", ResourceJob, "payments-ledger"},
		{"patterns miss", ResourceJob, "some-other-job-id"},
		{"unscoped", ResourceNode, "web"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.AllowJob(bc.r, bc.id, AccessWrite)
			}
		})
	}
}
