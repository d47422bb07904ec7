package acl

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
)

// Parse parses and validates rules text, HCL or, when its first non-space
// byte is '{', JSON. filename names the text in error messages. The error
// lists every problem found, one a line, each starting with the place it is
// at ("policy.hcl:3,3-9: ..."); every problem is an error wrapping its
// *hcl.Diagnostic, for callers that want the ranges.
func Parse(filename string, src []byte) (*Policy, error) {
	trimmed := bytes.TrimLeft(src, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%s: rules text is empty", filename)
	}
	p := &parser{filename: filename}
	var blocks []block
	if trimmed[0] == '{' {
		blocks = p.jsonBlocks(src)
	} else {
		blocks = p.hclBlocks(src)
	}
	policy := &Policy{}
	type key struct {
		r    Resource
		glob string
	}
	seen := make(map[key]hcl.Range)
	for _, b := range blocks {
		rule, ok := p.rule(b)
		if !ok {
			continue
		}
		k := key{rule.Resource, rule.Glob}
		if first, dup := seen[k]; dup {
			what := string(rule.Resource)
			if rule.Resource.Scoped() {
				what = fmt.Sprintf("%s %q", rule.Resource, rule.Glob)
			}
			if first == b.defRange {
				// Bodies in one JSON array share their header.
				p.errorf(b.defRange, "duplicate %s block", what)
			} else {
				p.errorf(b.defRange, "duplicate %s block (the first is at %s)", what, first)
			}
			continue
		}
		seen[k] = b.defRange
		policy.Rules = append(policy.Rules, rule)
	}
	if !p.diags.HasErrors() && len(policy.Rules) == 0 {
		// Comments alone, or "{}": a policy that grants nothing is
		// almost surely a mistake, as an empty text is.
		return nil, fmt.Errorf("%s: rules text has no rules", filename)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return policy, nil
}

// block is one block of the rules text as either syntax gives it: a type,
// the labels, and a body that should hold only the policy attribute.
type block struct {
	typ         string
	typeRange   hcl.Range
	labels      []string
	labelRanges []hcl.Range
	defRange    hcl.Range // the header: type and labels
	body        hcl.Body
}

// parser collects the problems of one rules text.
type parser struct {
	filename string
	diags    hcl.Diagnostics
}

func (p *parser) errorf(rng hcl.Range, format string, args ...any) {
	p.diags = append(p.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf(format, args...),
		Subject:  rng.Ptr(),
	})
}

// hclBlocks reads the blocks of HCL native syntax. It works on the syntax
// tree rather than through a schema because a schema fixes the number of
// labels of a block type, and job, allocation and deployment take zero or
// one.
func (p *parser) hclBlocks(src []byte) []block {
	file, diags := hclsyntax.ParseConfig(src, p.filename, hcl.InitialPos)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() || file == nil {
		return nil
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		// ParseConfig always returns a syntax body; stay safe if not.
		p.errorf(file.Body.MissingItemRange(), "rules text is not HCL")
		return nil
	}
	for _, attr := range sortedAttributes(body.Attributes) {
		p.errorf(attr.NameRange, "unexpected attribute %q: rules are blocks such as job, node or operator", attr.Name)
	}
	blocks := make([]block, 0, len(body.Blocks))
	for _, b := range body.Blocks {
		blocks = append(blocks, block{
			typ:         b.Type,
			typeRange:   b.TypeRange,
			labels:      b.Labels,
			labelRanges: b.LabelRanges,
			defRange:    b.DefRange(),
			body:        b.Body,
		})
	}
	return blocks
}

// sortedAttributes returns the attributes of an HCL body in source order,
// so that problems are reported in a stable order.
func sortedAttributes(attrs hclsyntax.Attributes) []*hclsyntax.Attribute {
	list := make([]*hclsyntax.Attribute, 0, len(attrs))
	for _, a := range attrs {
		list = append(list, a)
	}
	slices.SortFunc(list, func(a, b *hclsyntax.Attribute) int {
		return cmp.Compare(a.NameRange.Start.Byte, b.NameRange.Start.Byte)
	})
	return list
}

// jsonSchema lists the block types for the top level of JSON rules text,
// without labels: whether a block has a label is decided per block.
var jsonSchema = func() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, r := range Resources() {
		s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: string(r)})
	}
	return s
}()

// jsonBlocks reads the blocks of JSON syntax. In JSON a label is an object
// key: {"job": {"web-*": {"policy": "write"}}} has one, {"job": {"policy":
// "read"}} none. A block's object is taken as labels when every value in it
// is an object or an array (of bodies), as a body otherwise; so a glob
// named "policy" still works, and a stray key is reported as an unknown
// attribute rather than a label.
func (p *parser) jsonBlocks(src []byte) []block {
	file, diags := hcljson.Parse(src, p.filename)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() || file == nil {
		return nil
	}
	content, rest, diags := file.Body.PartialContent(jsonSchema)
	p.diags = append(p.diags, diags...)
	// What the schema left are keys naming no resource; report them in
	// the words HCL's unknown blocks get. (Duplicate unknown keys, the one
	// problem JustAttributes could add, need no second report.)
	others, _ := rest.JustAttributes()
	for _, a := range sortedHCLAttributes(others) {
		p.errorf(a.NameRange, "unknown block type %q: want %s", a.Name, resourceList())
	}
	var blocks []block
	for _, b := range content.Blocks {
		keys := labelKeys(b.Body)
		if len(keys) == 0 {
			blocks = append(blocks, block{
				typ:       b.Type,
				typeRange: b.TypeRange,
				defRange:  b.TypeRange,
				body:      b.Body,
			})
			continue
		}
		// Read the labelled bodies through a schema naming each key as a
		// block type; hcl then also unpacks arrays of bodies.
		schema := &hcl.BodySchema{}
		for _, k := range keys {
			schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: k})
		}
		inner, diags := b.Body.Content(schema)
		p.diags = append(p.diags, diags...)
		for _, ib := range inner.Blocks {
			blocks = append(blocks, block{
				typ:         b.Type,
				typeRange:   b.TypeRange,
				labels:      []string{ib.Type},
				labelRanges: []hcl.Range{ib.TypeRange},
				defRange:    hcl.RangeBetween(b.TypeRange, ib.TypeRange),
				body:        ib.Body,
			})
		}
	}
	return blocks
}

// labelKeys returns the keys of a JSON block's object when they are labels
// (every value an object or array), or nil when the object is a body.
func labelKeys(body hcl.Body) []string {
	// Problems (duplicate keys, a body that is not an object) are left for
	// the reading of the body itself to report, in one place.
	attrs, _ := body.JustAttributes()
	if len(attrs) == 0 {
		return nil
	}
	keys := make([]string, 0, len(attrs))
	for name, attr := range attrs {
		// Only the type matters here: a problem inside the value (say, a
		// duplicate key) is reported when the value is read as a body.
		v, _ := attr.Expr.Value(nil)
		if t := v.Type(); !t.IsObjectType() && !t.IsTupleType() {
			return nil
		}
		keys = append(keys, name)
	}
	slices.Sort(keys) // Content keeps source order; this only makes the schema stable
	return keys
}

// sortedHCLAttributes returns attributes in source order, so that problems
// are reported in a stable order.
func sortedHCLAttributes(attrs hcl.Attributes) []*hcl.Attribute {
	list := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		list = append(list, a)
	}
	slices.SortFunc(list, func(a, b *hcl.Attribute) int {
		return cmp.Compare(a.NameRange.Start.Byte, b.NameRange.Start.Byte)
	})
	return list
}

// rule validates one block and returns its rule; ok is false when the block
// had problems, which are then in p.diags.
func (p *parser) rule(b block) (r Rule, ok bool) {
	r.Resource = Resource(b.typ)
	if r.Resource.index() < 0 {
		p.errorf(b.typeRange, "unknown block type %q: want %s", b.typ, resourceList())
		return Rule{}, false
	}
	scoped := r.Resource.Scoped()
	ok = true
	switch {
	case scoped && len(b.labels) > 1:
		p.errorf(b.labelRanges[1], "%s block takes at most one label, a job-id glob", b.typ)
		ok = false
	case scoped && len(b.labels) == 1:
		r.Glob = b.labels[0]
		if why := checkGlob(r.Glob); why != "" {
			p.errorf(b.labelRanges[0], "job-id glob %q %s", r.Glob, why)
			ok = false
		}
	case scoped:
		r.Glob = "*"
	case len(b.labels) > 0:
		p.errorf(b.labelRanges[0], "%s block takes no label", b.typ)
		ok = false
	}
	d, dok := p.disposition(b)
	r.Disposition = d
	return r, ok && dok
}

// disposition reads the policy attribute of a block's body, the only thing
// a body may hold.
func (p *parser) disposition(b block) (Disposition, bool) {
	attrs, diags := b.body.JustAttributes()
	p.diags = append(p.diags, diags...)
	ok := !diags.HasErrors()
	var policy *hcl.Attribute
	for _, a := range sortedHCLAttributes(attrs) {
		if a.Name == "policy" {
			policy = a
			continue
		}
		p.errorf(a.NameRange, "unknown attribute %q in %s block: the only attribute is policy", a.Name, b.typ)
		ok = false
	}
	if policy == nil {
		if ok {
			p.errorf(b.defRange, "%s block has no policy: want policy = \"deny\", \"read\" or \"write\"", b.typ)
		}
		return "", false
	}
	// Evaluate first: a reference to a variable would otherwise come back
	// twice, as itself and as an unknown value.
	if _, diags := policy.Expr.Value(nil); diags.HasErrors() {
		p.diags = append(p.diags, diags...)
		return "", false
	}
	var s string
	if diags := gohcl.DecodeExpression(policy.Expr, nil, &s); diags.HasErrors() {
		p.diags = append(p.diags, diags...)
		return "", false
	}
	d := Disposition(s)
	if !d.known() {
		p.errorf(policy.NameRange, "unknown policy %q: want deny, read or write", s)
		return "", false
	}
	return d, ok
}

// resourceList names the block types for error messages.
func resourceList() string {
	names := make([]string, 0, numResources)
	for _, r := range Resources() {
		names = append(names, string(r))
	}
	return strings.Join(names, ", ")
}

// err turns the collected problems into one error, in source order, or nil
// when there were none. Identical messages are kept once.
func (p *parser) err() error {
	if !p.diags.HasErrors() {
		return nil
	}
	diags := slices.Clone(p.diags)
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		return cmp.Compare(startByte(a), startByte(b))
	})
	var errs []error
	seen := make(map[string]bool)
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		e := &diagError{filename: p.filename, diag: d}
		if msg := e.Error(); !seen[msg] {
			seen[msg] = true
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}

func startByte(d *hcl.Diagnostic) int {
	if d.Subject == nil {
		return -1
	}
	return d.Subject.Start.Byte
}

// diagError is one problem of a rules text.
type diagError struct {
	filename string
	diag     *hcl.Diagnostic
}

// Error formats the problem as "file:line,col-col: summary; detail".
func (e *diagError) Error() string {
	where := e.filename
	if e.diag.Subject != nil {
		where = e.diag.Subject.String()
	}
	msg := where + ": " + e.diag.Summary
	if e.diag.Detail != "" {
		msg += "; " + e.diag.Detail
	}
	return msg
}

// Unwrap returns the hcl diagnostic, which carries the range.
func (e *diagError) Unwrap() error {
	return e.diag
}
