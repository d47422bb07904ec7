// Package acl is the policy language of drover's access control: it parses
// and validates policies, merges a token's policies into one compiled ACL,
// and answers capability checks. It knows nothing of tokens, gRPC or the
// state store; callers hand it rules text and ask it questions.
//
// # Rules text
//
// A policy is HCL, or JSON when the first non-space byte is '{'. Each block
// is one rule; its only attribute, policy, is "deny", "read" or "write":
//
//	job "*"            { policy = "read" }   # job-id glob; optional, default "*"
//	job "web-*"        { policy = "write" }
//	allocation "web-*" { policy = "read" }   # allocations and evaluations
//	deployment         { policy = "write" }  # deployments; glob optional
//	node               { policy = "read" }   # no label
//	event              { policy = "read" }   # the event stream; no label
//	operator           { policy = "write" }  # raft, scheduler config, GC, snapshots
//	acl                { policy = "read" }   # tokens and policies
//
// The JSON form nests labels as object keys:
//
//	{"job": {"web-*": {"policy": "write"}}, "node": {"policy": "read"}}
//
// job, allocation and deployment are scoped: their rules carry a glob on job
// ids, where '*' matches any run of characters (including none) and every
// other character matches itself. A glob is 1 to 128 characters of letters,
// digits, '_', '.', '-' and '*', the characters of job ids plus the wildcard.
//
// # Merging
//
// A token holds several policies; New merges them. For a resource and, when
// it is scoped, a job id, every rule of every policy whose glob matches
// applies:
//
//   - if any of them is deny, there is no access: deny wins;
//   - otherwise the access is the highest of them, write implying read;
//   - no matching rule means no access.
//
// Unscoped resources work the same over all their rules.
//
// This deliberately differs from Nomad, where a rule with an exact name
// shadows glob rules. There, adding a policy with `job "web" { policy =
// "write" }` lifts a `job "*" { policy = "deny" }` for that job; here it does
// not, so a deny can be read on its own: no other rule, in any policy the
// token holds, can undo it. Grants only ever add up.
//
// # Two checks
//
// AllowJob is the per-object test: may the caller touch this job's objects?
// Allow is the admission test for calls that span jobs (lists, searches): it
// is true when some rule could grant the access on at least one job id, and
// the caller then filters results with AllowJob. Allow may admit a caller
// whom AllowJob then refuses every object (say, read on "web-a*" under a
// deny on "web-*"), but never the reverse; a deny on "*" matches every job
// id and so refuses admission too.
//
// Every check fails closed: a nil *ACL, an unknown resource, and a request for
// AccessNone or an unknown level are all refused.
package acl
