package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
)

// Resource is what a rule governs.
type Resource string

// Resources of the policy language.
const (
	ResourceJob        Resource = "job"
	ResourceAllocation Resource = "allocation" // allocations and evaluations
	ResourceDeployment Resource = "deployment"
	ResourceNode       Resource = "node"
	ResourceEvent      Resource = "event"
	ResourceOperator   Resource = "operator"
	ResourceACL        Resource = "acl"
)

// Resources lists every resource, in a fixed order.
func Resources() []Resource {
	return []Resource{ResourceJob, ResourceAllocation, ResourceDeployment, ResourceNode, ResourceEvent, ResourceOperator, ResourceACL}
}

// Scoped reports whether the resource's rules carry a glob on job ids.
func (r Resource) Scoped() bool {
	return r == ResourceJob || r == ResourceAllocation || r == ResourceDeployment
}

// Disposition is what a rule says.
type Disposition string

// Dispositions of a rule.
const (
	DispositionDeny  Disposition = "deny"
	DispositionRead  Disposition = "read"
	DispositionWrite Disposition = "write"
)

// Rule is one block of a policy.
type Rule struct {
	Resource Resource
	// Glob is the job-id glob of a scoped resource, "" otherwise.
	Glob        string
	Disposition Disposition
}

// Policy is a parsed, validated rules text.
type Policy struct {
	// Rules in source order.
	Rules []Rule
}

// maxGlobLen bounds a glob, as drover bounds a job id.
const maxGlobLen = 128

// policySchema is the top level of a rules text.
var policySchema = func() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, r := range Resources() {
		h := hcl.BlockHeaderSchema{Type: string(r)}
		if r.Scoped() {
			h.LabelNames = []string{"job_glob"}
		}
		s.Blocks = append(s.Blocks, h)
	}
	return s
}()

// blockSchema is the inside of every block.
var blockSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "policy", Required: true}}}

// Parse parses and validates rules text: JSON when its first non-blank
// character is '{', HCL otherwise. filename names the text in errors,
// which also give the line and column.
func Parse(filename string, src []byte) (*Policy, error) {
	trimmed := strings.TrimSpace(string(src))
	if trimmed == "" {
		return nil, fmt.Errorf("%s: the policy has no rules", filename)
	}
	var (
		file  *hcl.File
		diags hcl.Diagnostics
	)
	if strings.HasPrefix(trimmed, "{") {
		file, diags = hcljson.Parse(src, filename)
	} else {
		file, diags = hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	}
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	content, diags := file.Body.Content(policySchema)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	p := &Policy{}
	seen := map[Rule]bool{}
	for _, b := range content.Blocks {
		r, err := parseBlock(b)
		if err != nil {
			return nil, err
		}
		key := Rule{Resource: r.Resource, Glob: r.Glob}
		if seen[key] {
			return nil, rangeError(b.DefRange, "duplicate %s block%s", r.Resource, labelText(r.Glob))
		}
		seen[key] = true
		p.Rules = append(p.Rules, r)
	}
	if len(p.Rules) == 0 {
		return nil, fmt.Errorf("%s: the policy has no rules", filename)
	}
	return p, nil
}

func labelText(glob string) string {
	if glob == "" {
		return ""
	}
	return fmt.Sprintf(" %q", glob)
}

// parseBlock reads one block's rule.
func parseBlock(b *hcl.Block) (Rule, error) {
	r := Rule{Resource: Resource(b.Type)}
	if r.Resource.Scoped() {
		r.Glob = b.Labels[0]
		if err := checkGlob(r.Glob); err != nil {
			return r, rangeError(b.LabelRanges[0], "%s block: %v", r.Resource, err)
		}
	}
	content, diags := b.Body.Content(blockSchema)
	if diags.HasErrors() {
		return r, diagError(diags)
	}
	attr := content.Attributes["policy"]
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return r, diagError(diags)
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return r, rangeError(attr.Range, "%s block: policy must be a string: deny, read or write", r.Resource)
	}
	switch d := Disposition(v.AsString()); d {
	case DispositionDeny, DispositionRead, DispositionWrite:
		r.Disposition = d
	default:
		return r, rangeError(attr.Expr.Range(), "%s block: unknown policy %q: want deny, read or write", r.Resource, v.AsString())
	}
	return r, nil
}

// checkGlob checks a job-id glob: what a job id may hold, and '*'.
func checkGlob(g string) error {
	if g == "" || len(g) > maxGlobLen {
		return fmt.Errorf("glob %q must have 1 to %d characters", g, maxGlobLen)
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '.', c == '-', c == '*':
		default:
			return fmt.Errorf("glob %q may hold only letters, digits, '_', '.', '-' and '*'", g)
		}
	}
	return nil
}

// rangeError is an error at a place in the rules text.
func rangeError(rng hcl.Range, format string, args ...any) error {
	return fmt.Errorf("%s: %s", rng.String(), fmt.Sprintf(format, args...))
}

// diagError joins hcl's error diagnostics, each with its place.
func diagError(diags hcl.Diagnostics) error {
	var errs []error
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if d.Subject != nil {
			msg = d.Subject.String() + ": " + msg
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}
