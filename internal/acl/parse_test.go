package acl

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// parseCases are rules texts written twice, in HCL and in JSON, that must
// give the same rules. The fuzz target seeds its corpus from them too.
var parseCases = []struct {
	name      string
	hcl, json string
	wantRules []Rule
}{
	{
		name: "every block type",
		hcl: `
job "*"            { policy = "read" }
job "web-*"        { policy = "write" }
allocation "web-*" { policy = "read" }
deployment         { policy = "write" }
node               { policy = "read" }
event              { policy = "read" }
operator           { policy = "write" }
acl                { policy = "deny" }
`,
		json: `{
  "job": {"*": {"policy": "read"}, "web-*": {"policy": "write"}},
  "allocation": {"web-*": {"policy": "read"}},
  "deployment": {"policy": "write"},
  "node": {"policy": "read"},
  "event": {"policy": "read"},
  "operator": {"policy": "write"},
  "acl": {"policy": "deny"}
}`,
		wantRules: []Rule{
			{ResourceJob, "*", DispositionRead},
			{ResourceJob, "web-*", DispositionWrite},
			{ResourceAllocation, "web-*", DispositionRead},
			{ResourceDeployment, "*", DispositionWrite},
			{ResourceNode, "", DispositionRead},
			{ResourceEvent, "", DispositionRead},
			{ResourceOperator, "", DispositionWrite},
			{ResourceACL, "", DispositionDeny},
		},
	},
	{
		name: "unlabelled job means every job",
		hcl:  `job { policy = "read" }`,
		json: `{"job": {"policy": "read"}}`,
		wantRules: []Rule{
			{ResourceJob, "*", DispositionRead},
		},
	},
	{
		name: "a glob named policy",
		hcl:  `job "policy" { policy = "deny" }`,
		json: `{"job": {"policy": {"policy": "deny"}}}`,
		wantRules: []Rule{
			{ResourceJob, "policy", DispositionDeny},
		},
	},
	{
		name: "blocks repeated in arrays, comments",
		hcl: `
# Operators read jobs and run the web ones.
job "web-*" { policy = "write" }
job "api.v2_*" { policy = "read" } // and the API's
node { policy = "write" }
`,
		json: `{
  "//": "Operators read jobs and run the web ones.",
  "job": [{"web-*": {"policy": "write"}}, {"api.v2_*": {"policy": "read"}}],
  "node": [{"policy": "write"}]
}`,
		wantRules: []Rule{
			{ResourceJob, "web-*", DispositionWrite},
			{ResourceJob, "api.v2_*", DispositionRead},
			{ResourceNode, "", DispositionWrite},
		},
	},
	{
		name: "labels as bare identifiers",
		hcl:  "job web { policy = \"read\" }\nallocation web { policy = \"deny\" }",
		json: `{"job": {"web": {"policy": "read"}}, "allocation": {"web": {"policy": "deny"}}}`,
		wantRules: []Rule{
			{ResourceJob, "web", DispositionRead},
			{ResourceAllocation, "web", DispositionDeny},
		},
	},
	{
		name: "leading space before JSON",
		hcl:  "\n\n  event {\n    policy = \"read\"\n  }\n",
		json: " \n\t{\"event\": {\"policy\": \"read\"}}\n",
		wantRules: []Rule{
			{ResourceEvent, "", DispositionRead},
		},
	},
}

func TestParseHCLAndJSON(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			for form, src := range map[string]string{"hcl": tc.hcl, "json": tc.json} {
				p, err := Parse("policy."+form, []byte(src))
				if err != nil {
					t.Fatalf("%s: Parse: %v", form, err)
				}
				if !slices.Equal(p.Rules, tc.wantRules) {
					t.Errorf("%s: rules\n got %v\nwant %v", form, p.Rules, tc.wantRules)
				}
			}
		})
	}
}

// parseErrorCases are invalid rules texts and what the error must say,
// starting with the place of the problem.
var parseErrorCases = []struct {
	name string
	src  string
	want []string // each must appear in the error
}{
	{"empty", "", []string{"policy.hcl: rules text is empty"}},
	{"blank", " \n\t\n", []string{"policy.hcl: rules text is empty"}},
	{"comments only", "# nothing yet\n", []string{"policy.hcl: rules text has no rules"}},
	{"empty JSON object", "{}", []string{"policy.hcl: rules text has no rules"}},
	{"HCL syntax", "job {\n  policy = \"read\"\n", []string{"policy.hcl:1,5-6: Unclosed configuration block"}},
	{"JSON syntax", "{\"job\": {\"policy\": \"read\"}\n", []string{"policy.hcl:1,1-2: Unclosed object"}},
	{
		"unknown block",
		"job { policy = \"read\" }\nnamespace \"x\" { policy = \"read\" }",
		[]string{`policy.hcl:2,1-10: unknown block type "namespace"`},
	},
	{
		"unknown block in JSON",
		"{\"job\": {\"policy\": \"read\"},\n \"namespace\": {\"policy\": \"read\"}}",
		[]string{`policy.hcl:2,2-13: unknown block type "namespace"`},
	},
	{
		"attribute at top level",
		"job { policy = \"read\" }\n\npolicy = \"read\"",
		[]string{`policy.hcl:3,1-7: unexpected attribute "policy"`},
	},
	{
		"unknown attribute",
		"node {\n  policy = \"read\"\n  capabilities = [\"read-job\"]\n}",
		[]string{`policy.hcl:3,3-15: unknown attribute "capabilities" in node block`},
	},
	{
		"unknown attribute in JSON",
		"{\"node\": {\n  \"policy\": \"read\",\n  \"capabilities\": [\"read-job\"]}}",
		[]string{`policy.hcl:3,3-17: unknown attribute "capabilities" in node block`},
	},
	{
		"nested block",
		"acl {\n  policy = \"read\"\n  token {}\n}",
		[]string{`policy.hcl:3,3-8: Unexpected "token" block`},
	},
	{
		"label on node",
		"node \"n1\" {\n  policy = \"read\"\n}",
		[]string{`policy.hcl:1,6-10: node block takes no label`},
	},
	{
		"label on operator in JSON",
		"{\"operator\": {\n  \"raft\": {\"policy\": \"write\"}}}",
		[]string{`policy.hcl:2,3-9: operator block takes no label`},
	},
	{
		"two labels",
		"job \"web\" \"api\" { policy = \"read\" }",
		[]string{`policy.hcl:1,11-16: job block takes at most one label`},
	},
	{
		"missing policy",
		"job \"*\" { policy = \"read\" }\ndeployment \"web-*\" {\n}",
		[]string{`policy.hcl:2,1-19: deployment block has no policy`},
	},
	{
		"missing policy in JSON",
		"{\"deployment\": {\n \"web-*\": {}}}",
		[]string{`policy.hcl:1,2-2,9: deployment block has no policy`},
	},
	{
		"unknown policy",
		"job \"*\" {\n  policy = \"read\"\n}\nacl {\n  policy = \"admin\"\n}",
		[]string{`policy.hcl:5,3-9: unknown policy "admin": want deny, read or write`},
	},
	{
		"unknown policy in JSON",
		"{\"acl\": {\n  \"policy\": \"Write\"}}",
		[]string{`policy.hcl:2,3-11: unknown policy "Write"`},
	},
	{
		"policy not a string",
		"event { policy = null }",
		[]string{`policy.hcl:1,18-22: Unsuitable value type`},
	},
	{
		"policy a variable",
		"event { policy = read }",
		[]string{`policy.hcl:1,18-22: Variables not allowed`},
	},
	{
		"duplicate glob",
		"job \"web-*\" { policy = \"read\" }\n\njob \"web-*\" { policy = \"write\" }",
		[]string{`policy.hcl:3,1-12: duplicate job "web-*" block (the first is at policy.hcl:1,1-12)`},
	},
	{
		"unlabelled job duplicates \"*\"",
		"job \"*\" { policy = \"read\" }\njob { policy = \"deny\" }",
		[]string{`policy.hcl:2,1-4: duplicate job "*" block`},
	},
	{
		"duplicate unscoped block",
		"node { policy = \"read\" }\nnode { policy = \"write\" }",
		[]string{`policy.hcl:2,1-5: duplicate node block`},
	},
	{
		"duplicate glob in JSON",
		"{\"job\": [\n {\"web-*\": {\"policy\": \"read\"}},\n {\"web-*\": {\"policy\": \"deny\"}}]}",
		[]string{`policy.hcl:1,2-3,10: duplicate job "web-*" block (the first is at policy.hcl:1,2-2,10)`},
	},
	{
		"bad glob character",
		"job \"web/*\" { policy = \"read\" }",
		[]string{`policy.hcl:1,5-12: job-id glob "web/*" may contain only`},
	},
	{
		"empty glob",
		"allocation \"\" { policy = \"read\" }",
		[]string{`policy.hcl:1,12-14: job-id glob "" is empty`},
	},
	{
		"long glob",
		"job \"" + strings.Repeat("a", 129) + "\" { policy = \"read\" }",
		[]string{`policy.hcl:1,5-136: job-id glob`, "longer than 128"},
	},
	{
		"every problem is reported",
		"node \"x\" { policy = \"read\" }\nevent { policy = \"all\" }",
		[]string{`policy.hcl:1,6-9: node block takes no label`, `policy.hcl:2,9-15: unknown policy "all"`},
	},
}

func TestParseErrors(t *testing.T) {
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("policy.hcl", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse succeeded with %v, want an error", p.Rules)
			}
			if p != nil {
				t.Errorf("Parse returned a policy with its error: %v", p.Rules)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, want)
				}
			}
		})
	}
}

func TestParseLongestGlob(t *testing.T) {
	glob := strings.Repeat("a", 127) + "*"
	p, err := Parse("p", []byte(`job "`+glob+`" { policy = "read" }`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Rules[0].Glob != glob {
		t.Errorf("glob %q, want %q", p.Rules[0].Glob, glob)
	}
}

func TestParseErrorWrapsDiagnostics(t *testing.T) {
	_, err := Parse("p.hcl", []byte("node {\n  policy = \"sudo\"\n}"))
	var d *hcl.Diagnostic
	if !errors.As(err, &d) {
		t.Fatalf("error %v wraps no *hcl.Diagnostic", err)
	}
	if d.Subject == nil || d.Subject.Start.Line != 2 || d.Subject.Filename != "p.hcl" {
		t.Errorf("diagnostic subject %v, want line 2 of p.hcl", d.Subject)
	}
}
