package rpc

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/acl"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TokenMetadataKey is the gRPC metadata key carrying the caller's token
// secret. "authorization: Bearer <secret>" is accepted too.
const TokenMetadataKey = "x-drover-token"

// AnonymousPolicy is the name of the policy that applies to calls without a
// token. Until an operator writes one, such calls may do nothing.
const AnonymousPolicy = "anonymous"

// Accessor ids of the identities that are not tokens.
const (
	accessorAnonymous    = "anonymous"
	accessorACLsDisabled = "acls-disabled"
	// accessorInvalid names, in the audit trail, a caller whose secret
	// named no valid token.
	accessorInvalid = "invalid-token"
)

// errUnauthenticated marks a secret that names no valid token: unknown,
// deleted or expired. Unlike PERMISSION_DENIED it tells a CLI or UI to ask
// for a new token.
var errUnauthenticated = errors.New("unauthenticated")

// Identity is who made a call, as the receiving server resolved it.
type Identity struct {
	// Accessor is the token's accessor id, "anonymous" or "acls-disabled".
	Accessor string
	// Token is the caller's token; nil for the other identities.
	Token *droverv1.ACLToken
	// ACL is what the identity may do.
	ACL *acl.ACL
}

type identityKey struct{}

// identityFrom returns the identity the enforcer resolved for the call in
// ctx, or nil.
func identityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

// tokenSecret is the secret the caller sent, or "".
func tokenSecret(ctx context.Context) string {
	// One key at a time: FromIncomingContext would copy every key the
	// call carries, on every call.
	if v := metadata.ValueFromIncomingContext(ctx, TokenMetadataKey); len(v) > 0 {
		return v[0]
	}
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		if s, ok := strings.CutPrefix(v, "Bearer "); ok {
			return s
		}
	}
	return ""
}

// resolver turns secrets into identities from this server's replicated
// state. It caches what it compiled and drops the cache whenever the ACL
// tables change, so no server honours a deleted token once it has applied
// the deletion.
type resolver struct {
	enabled bool
	state   func() *state.StateStore
	now     func() time.Time

	mu sync.Mutex
	// index is the ACL index the cache was built at.
	index uint64
	byKey map[[sha256.Size]byte]*Identity
	anon  *Identity
}

func newResolver(enabled bool, st func() *state.StateStore, now func() time.Time) *resolver {
	if now == nil {
		now = time.Now
	}
	return &resolver{enabled: enabled, state: st, now: now, byKey: map[[sha256.Size]byte]*Identity{}}
}

var aclsDisabled = &Identity{Accessor: accessorACLsDisabled, ACL: acl.Management()}

// resolve returns the identity of a secret ("" is anonymous). An unknown or
// expired secret is errUnauthenticated.
func (r *resolver) resolve(secret string) (*Identity, error) {
	if !r.enabled {
		return aclsDisabled, nil
	}
	snap := r.state().Snapshot()
	r.mu.Lock()
	defer r.mu.Unlock()
	if idx := snap.ACLIndex(); idx != r.index {
		r.index, r.anon = idx, nil
		clear(r.byKey)
	}
	if secret == "" {
		if r.anon == nil {
			r.anon = &Identity{Accessor: accessorAnonymous, ACL: compile(snap, []string{AnonymousPolicy})}
		}
		return r.anon, nil
	}
	key := sha256.Sum256([]byte(secret))
	id := r.byKey[key]
	if id == nil {
		t := snap.ACLTokenBySecretHash(key[:])
		if t == nil {
			return nil, fmt.Errorf("ACL token not found: it does not exist or was deleted: %w", errUnauthenticated)
		}
		id = &Identity{Accessor: t.GetAccessorId(), Token: t, ACL: tokenACL(snap, t)}
		r.byKey[key] = id
	}
	if exp := id.Token.GetExpirationTime(); exp != nil && !r.now().Before(exp.AsTime()) {
		return nil, fmt.Errorf("ACL token %s expired at %s: %w", id.Accessor, exp.AsTime().UTC().Format(time.RFC3339), errUnauthenticated)
	}
	return id, nil
}

// tokenACL compiles what t may do.
func tokenACL(snap *state.Snapshot, t *droverv1.ACLToken) *acl.ACL {
	if t.GetType() == droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT {
		return acl.Management()
	}
	return compile(snap, t.GetPolicies())
}

// compile merges the named policies. A policy that no longer exists grants
// nothing; stored rules were validated when written, so one that fails to
// parse (written by a newer release) is skipped too.
func compile(snap *state.Snapshot, names []string) *acl.ACL {
	var policies []*acl.Policy
	for _, name := range names {
		p := snap.ACLPolicy(name)
		if p == nil {
			continue
		}
		if parsed, err := acl.Parse(name, []byte(p.GetRules())); err == nil {
			policies = append(policies, parsed)
		}
	}
	return acl.New(policies...)
}

// enforcer applies accessRules to every call.
type enforcer struct {
	resolver *resolver
	state    func() *state.StateStore
	// serverPeer, if set, reports whether the caller presented a server
	// certificate (nil error). A server calling another with no token, for
	// the cluster's own work (a server rebuilding itself from its peers
	// lists and removes raft peers), acts as a management token: a server
	// certificate already lets it speak raft.
	serverPeer func(ctx context.Context) error
}

// accessorServer names a server acting for the cluster, in the audit
// trail.
const accessorServer = "server"

var serverIdentity = &Identity{Accessor: accessorServer, ACL: acl.Management()}

// asServerKey marks a forwarded call that a server made for the cluster
// (not one it passes on for a client). Only a caller with a server
// certificate is believed.
const asServerKey = "drover-as-server"

// resolveCaller resolves the caller of ctx: its token, or, with no token
// and a server certificate, a server acting for the cluster: one that made
// the call itself, or forwards a call it made.
func (e *enforcer) resolveCaller(ctx context.Context) (*Identity, error) {
	secret := tokenSecret(ctx)
	if secret == "" && e.resolver.enabled && e.serverPeer != nil && (incomingHops(ctx) == 0 || forwardedAsServer(ctx)) && e.serverPeer(ctx) == nil {
		return serverIdentity, nil
	}
	return e.resolver.resolve(secret)
}

func forwardedAsServer(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, asServerKey)) > 0
}

// authorize resolves the caller and checks what method needs. It returns
// the identity to put in the call's context, and the rule for filtering the
// answer.
func (e *enforcer) authorize(ctx context.Context, method string, req any) (*Identity, rule, error) {
	r, ok := accessRules[method]
	if !ok {
		// The rules test keeps this from happening; refuse rather than
		// let an unlisted method through.
		return nil, r, status.Errorf(codes.PermissionDenied, "%s has no access rule", method)
	}
	switch r.caller {
	case callerNode, callerServer:
		// Held to node secrets and server certificates elsewhere.
		return nil, r, nil
	case callerAnyone:
		id, err := e.resolver.resolve(tokenSecret(ctx))
		if err != nil {
			// A bad token on an open call is no reason to refuse it.
			id = &Identity{Accessor: accessorAnonymous, ACL: acl.New()}
		}
		return id, r, nil
	}
	id, err := e.resolveCaller(ctx)
	if err != nil {
		return &Identity{Accessor: accessorInvalid, ACL: acl.New()}, r, err
	}
	if r.caller == callerToken {
		if id.Token == nil && id != aclsDisabled {
			return id, r, fmt.Errorf("%s needs a token: %w", method, errUnauthenticated)
		}
		return id, r, nil
	}
	job := ""
	if r.job != nil && r.resource.Scoped() {
		job = r.job(e.state().Snapshot(), req)
	}
	allowed := id.ACL.Allow(r.resource, r.access)
	if job != "" {
		allowed = id.ACL.AllowJob(r.resource, job, r.access)
	}
	if r.management && !id.ACL.IsManagement() {
		return id, r, fmt.Errorf("%s needs a management token, which token %s is not: %w", method, id.Accessor, errPermissionDenied)
	}
	if !allowed {
		return id, r, denied(id, method, r, job)
	}
	return id, r, nil
}

// denied is the error for a call the identity may not make.
func denied(id *Identity, method string, r rule, job string) error {
	what := string(r.resource)
	if job != "" {
		what = fmt.Sprintf("%s %q", r.resource, job)
	}
	return fmt.Errorf("%s needs %s on %s, which token %s does not grant: %w", method, r.access, what, id.Accessor, errPermissionDenied)
}

func (e *enforcer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	id, r, err := e.authorize(ctx, info.FullMethod, req)
	if id != nil {
		ctx = context.WithValue(ctx, identityKey{}, id)
		recordCaller(ctx, id.Accessor)
	}
	if err != nil {
		return nil, err
	}
	resp, err := handler(ctx, req)
	if err != nil || r.filter == nil || id == nil || id == aclsDisabled {
		return resp, err
	}
	if err := r.filter(id.ACL, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (e *enforcer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	id, _, err := e.authorize(ss.Context(), info.FullMethod, nil)
	if id != nil {
		recordCaller(ss.Context(), id.Accessor)
	}
	if err != nil {
		return err
	}
	if id == nil {
		return handler(srv, ss)
	}
	return handler(srv, &identityStream{ServerStream: ss, id: id})
}

// identityStream carries the caller's identity and keeps from the events
// it sends those the identity may not read.
type identityStream struct {
	grpc.ServerStream
	id *Identity
}

func (s *identityStream) Context() context.Context {
	return context.WithValue(s.ServerStream.Context(), identityKey{}, s.id)
}

func (s *identityStream) SendMsg(m any) error {
	if resp, ok := m.(*droverv1.StreamEventsResponse); ok && s.id != aclsDisabled {
		// Events are shared by every subscriber: filter a copy.
		m = &droverv1.StreamEventsResponse{
			Events:       keep(resp.GetEvents(), func(ev *droverv1.Event) bool { return eventReadable(s.id.ACL, ev) }),
			Index:        resp.GetIndex(),
			EventsMissed: resp.GetEventsMissed(),
		}
	}
	return s.ServerStream.SendMsg(m)
}
