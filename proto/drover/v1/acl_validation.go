package droverv1

import (
	"fmt"
	"time"
)

// Bounds of ACL objects.
const (
	// maxACLPolicyRules bounds a policy's rules text.
	maxACLPolicyRules = 64 << 10
	// maxACLDescription bounds a policy's description and a token's name.
	maxACLDescription = 256
	// maxACLTokenPolicies bounds the policies of one token.
	maxACLTokenPolicies = 64
	// MaxACLTokenTTL is the longest time a token may be created to work.
	MaxACLTokenTTL = 10 * 365 * 24 * time.Hour
)

// Validate checks a policy write. The rules' language is checked by the
// server (internal/acl), which knows it.
func (r *ApplyACLPolicyRequest) Validate() error {
	var v violations
	p := r.GetPolicy()
	if p == nil {
		v.add("policy", "is required")
		return v.err()
	}
	v.identifier("policy.name", p.GetName())
	v.text("policy.description", p.GetDescription(), maxACLDescription, false)
	v.text("policy.rules", p.GetRules(), maxACLPolicyRules, true)
	return v.err()
}

// Validate checks a policy deletion.
func (r *DeleteACLPolicyRequest) Validate() error {
	var v violations
	v.identifier("name", r.GetName())
	return v.err()
}

// Validate checks a policy read.
func (r *GetACLPolicyRequest) Validate() error {
	var v violations
	v.identifier("name", r.GetName())
	return v.err()
}

// Validate checks a token creation.
func (r *CreateACLTokenRequest) Validate() error {
	var v violations
	v.text("name", r.GetName(), maxACLDescription, false)
	switch r.GetType() {
	case ACLTokenType_ACL_TOKEN_TYPE_CLIENT:
		if len(r.GetPolicies()) == 0 {
			v.add("policies", "a client token needs at least one policy")
		}
	case ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT:
		if len(r.GetPolicies()) != 0 {
			v.add("policies", "a management token has no policies: it may do everything")
		}
	default:
		v.add("type", "must be client or management")
	}
	validateTokenPolicies(&v, r.GetPolicies())
	if ttl := r.GetTtl(); ttl != nil {
		d := ttl.AsDuration()
		if !ttl.IsValid() || d < 0 || d > MaxACLTokenTTL {
			v.add("ttl", "must be between 0 (never expires) and %s", MaxACLTokenTTL)
		}
	}
	return v.err()
}

// Validate checks a token update.
func (r *UpdateACLTokenRequest) Validate() error {
	var v violations
	v.uuid("accessor_id", r.GetAccessorId())
	v.text("name", r.GetName(), maxACLDescription, false)
	validateTokenPolicies(&v, r.GetPolicies())
	return v.err()
}

func validateTokenPolicies(v *violations, names []string) {
	if len(names) > maxACLTokenPolicies {
		v.add("policies", "must name at most %d policies", maxACLTokenPolicies)
		return
	}
	seen := make(map[string]bool, len(names))
	for i, name := range names {
		v.identifier(fmt.Sprintf("policies[%d]", i), name)
		if seen[name] {
			v.add(fmt.Sprintf("policies[%d]", i), "names %q twice", name)
		}
		seen[name] = true
	}
}

// Validate checks a token deletion.
func (r *DeleteACLTokenRequest) Validate() error {
	var v violations
	v.uuid("accessor_id", r.GetAccessorId())
	return v.err()
}

// Validate checks a token read.
func (r *GetACLTokenRequest) Validate() error {
	var v violations
	v.uuid("accessor_id", r.GetAccessorId())
	return v.err()
}
