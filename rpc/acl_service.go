package rpc

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/acl"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// aclService implements droverv1.ACLService. Secrets are made here, on the
// leader, and only their hashes go to raft.
type aclService struct {
	*services
	droverv1.UnimplementedACLServiceServer
	// enabled is whether ACLs are on; every call but Self is refused while
	// they are off, so nobody believes a policy is enforced.
	enabled bool
	// resetFile is where an operator writes the reset index to bootstrap
	// again.
	resetFile string
}

// errACLsDisabled refuses ACL management on a server without -acl-enabled.
var errACLsDisabled = fmt.Errorf("ACLs are disabled on this server: start every server with -acl-enabled: %w", ErrFailedPrecondition)

func (s *aclService) checkEnabled() error {
	if !s.enabled {
		return errACLsDisabled
	}
	return nil
}

// Bootstrap creates the first management token. Once done it is refused
// unless the reset file holds the current reset index; the FSM checks the
// index again, so of two racing bootstraps exactly one wins.
func (s *aclService) Bootstrap(ctx context.Context, _ *droverv1.ACLBootstrapRequest) (*droverv1.ACLTokenSecretResponse, error) {
	if err := s.checkEnabled(); err != nil {
		return nil, err
	}
	var reset uint64
	if done := s.backend.State().Snapshot().ACLBootstrap(); done != nil {
		if err := s.resetAllowed(done.GetIndex()); err != nil {
			return nil, err
		}
		reset = done.GetIndex()
	}
	token, secret, err := newToken("Bootstrap Token", droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT, nil, nil)
	if err != nil {
		return nil, err
	}
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeACLBootstrap, &droverv1.ACLBootstrapEntry{Token: token, ResetIndex: reset})
	if err != nil {
		return nil, err
	}
	if reset != 0 {
		// The reset index is spent; the file would only mislead.
		if err := os.Remove(s.resetFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.logger.Warn("could not remove the ACL bootstrap reset file", "file", s.resetFile, "err", err)
		}
		s.logger.Warn("ACLs bootstrapped again: the previous bootstrap token is deleted", "index", index, "accessor", token.GetAccessorId())
	}
	return &droverv1.ACLTokenSecretResponse{Token: forDisplay(token), SecretId: secret, Index: index}, nil
}

// resetAllowed reports whether the reset file names the current reset
// index.
func (s *aclService) resetAllowed(current uint64) error {
	done := fmt.Errorf("ACL bootstrap already done (reset index %d); to bootstrap again, write %d to %s on the leader: %w",
		current, current, s.resetFile, ErrFailedPrecondition)
	if s.resetFile == "" {
		return done
	}
	raw, err := os.ReadFile(s.resetFile)
	if err != nil {
		return done
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || n != current {
		return fmt.Errorf("ACL bootstrap reset file %s holds %q, not the reset index %d: %w",
			s.resetFile, strings.TrimSpace(string(raw)), current, ErrFailedPrecondition)
	}
	return nil
}

// newToken makes a token with fresh random ids; the secret is returned
// apart, and only its hash is in the token.
func newToken(name string, typ droverv1.ACLTokenType, policies []string, ttl *timestamppb.Timestamp) (*droverv1.ACLToken, string, error) {
	accessor, err := uuid.NewRandom()
	if err != nil {
		return nil, "", fmt.Errorf("generate token accessor id: %w", err)
	}
	secret, err := uuid.NewRandom()
	if err != nil {
		return nil, "", fmt.Errorf("generate token secret: %w", err)
	}
	hash := sha256.Sum256([]byte(secret.String()))
	return &droverv1.ACLToken{
		AccessorId: accessor.String(), SecretHash: hash[:], Name: name, Type: typ, Policies: policies,
		CreateTime: timestamppb.Now(), ExpirationTime: ttl,
	}, secret.String(), nil
}

// forDisplay is t without its secret hash: answers never carry it.
func forDisplay(t *droverv1.ACLToken) *droverv1.ACLToken {
	if t == nil {
		return nil
	}
	out := t.CloneVT()
	out.SecretHash = nil
	return out
}

// ApplyPolicy creates or replaces a policy, once its rules parse.
func (s *aclService) ApplyPolicy(ctx context.Context, req *droverv1.ApplyACLPolicyRequest) (*droverv1.ACLWriteResponse, error) {
	if err := s.checkEnabled(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	p := req.GetPolicy()
	if _, err := acl.Parse(p.GetName()+".hcl", []byte(p.GetRules())); err != nil {
		return nil, fmt.Errorf("policy %q: %w: %w", p.GetName(), err, ErrInvalidArgument)
	}
	entry := &droverv1.ACLPolicyEntry{Upserts: []*droverv1.ACLPolicy{{Name: p.GetName(), Description: p.GetDescription(), Rules: p.GetRules()}}}
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeACLPolicy, entry)
	if err != nil {
		return nil, err
	}
	return &droverv1.ACLWriteResponse{Index: index}, nil
}

// DeletePolicy deletes a policy; tokens naming it lose its rules.
func (s *aclService) DeletePolicy(ctx context.Context, req *droverv1.DeleteACLPolicyRequest) (*droverv1.ACLWriteResponse, error) {
	if err := s.checkEnabled(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if s.backend.State().Snapshot().ACLPolicy(req.GetName()) == nil {
		return nil, fmt.Errorf("ACL policy %q: %w", req.GetName(), state.ErrNotFound)
	}
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeACLPolicy, &droverv1.ACLPolicyEntry{Deletes: []string{req.GetName()}})
	if err != nil {
		return nil, err
	}
	return &droverv1.ACLWriteResponse{Index: index}, nil
}

// GetPolicy returns one policy.
func (s *aclService) GetPolicy(ctx context.Context, req *droverv1.GetACLPolicyRequest) (*droverv1.GetACLPolicyResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	p, meta, err := getObject(ctx, s.services, req.GetQuery(), state.TableACLPolicies, fmt.Sprintf("ACL policy %q", req.GetName()),
		func(snap *state.Snapshot) *droverv1.ACLPolicy { return snap.ACLPolicy(req.GetName()) })
	if err != nil {
		return nil, err
	}
	return &droverv1.GetACLPolicyResponse{Policy: p, Meta: meta}, nil
}

// ListPolicies returns every policy in name order.
func (s *aclService) ListPolicies(ctx context.Context, req *droverv1.ListACLPoliciesRequest) (*droverv1.ListACLPoliciesResponse, error) {
	policies, _, meta, err := listObjects(ctx, s.services, req.GetQuery(), state.TableACLPolicies,
		func(snap *state.Snapshot) ([]*droverv1.ACLPolicy, string) {
			return slices.Collect(snap.ACLPolicies()), ""
		})
	if err != nil {
		return nil, err
	}
	return &droverv1.ListACLPoliciesResponse{Policies: policies, Meta: meta}, nil
}

// CreateToken creates a token. Only a management token may create a
// management token, so that acl write cannot be turned into everything.
func (s *aclService) CreateToken(ctx context.Context, req *droverv1.CreateACLTokenRequest) (*droverv1.ACLTokenSecretResponse, error) {
	if err := s.checkEnabled(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if req.GetType() == droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT && !identityFrom(ctx).ACL.IsManagement() {
		return nil, fmt.Errorf("only a management token may create a management token: %w", errPermissionDenied)
	}
	if err := s.policiesExist(req.GetPolicies()); err != nil {
		return nil, err
	}
	var expiry *timestamppb.Timestamp
	if ttl := req.GetTtl().AsDuration(); ttl > 0 {
		expiry = timestamppb.New(timestamppb.Now().AsTime().Add(ttl))
	}
	token, secret, err := newToken(req.GetName(), req.GetType(), req.GetPolicies(), expiry)
	if err != nil {
		return nil, err
	}
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeACLToken, &droverv1.ACLTokenEntry{Upserts: []*droverv1.ACLToken{token}})
	if err != nil {
		return nil, err
	}
	token.CreateIndex, token.ModifyIndex = index, index
	return &droverv1.ACLTokenSecretResponse{Token: forDisplay(token), SecretId: secret, Index: index}, nil
}

// policiesExist refuses names of policies that do not exist: a typo would
// otherwise grant nothing, silently.
func (s *aclService) policiesExist(names []string) error {
	snap := s.backend.State().Snapshot()
	for _, name := range names {
		if snap.ACLPolicy(name) == nil {
			return fmt.Errorf("ACL policy %q does not exist: %w", name, ErrInvalidArgument)
		}
	}
	return nil
}

// UpdateToken replaces a token's name and policies.
func (s *aclService) UpdateToken(ctx context.Context, req *droverv1.UpdateACLTokenRequest) (*droverv1.ACLTokenResponse, error) {
	if err := s.checkEnabled(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	old := s.backend.State().Snapshot().ACLToken(req.GetAccessorId())
	if old == nil {
		return nil, fmt.Errorf("ACL token %s: %w", req.GetAccessorId(), state.ErrNotFound)
	}
	if old.GetType() == droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT && len(req.GetPolicies()) > 0 {
		return nil, fmt.Errorf("ACL token %s is a management token, which has no policies: %w", req.GetAccessorId(), ErrInvalidArgument)
	}
	if old.GetType() == droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT && len(req.GetPolicies()) == 0 {
		return nil, fmt.Errorf("ACL token %s is a client token, which needs at least one policy: %w", req.GetAccessorId(), ErrInvalidArgument)
	}
	if err := s.policiesExist(req.GetPolicies()); err != nil {
		return nil, err
	}
	t := old.CloneVT()
	t.Name, t.Policies = req.GetName(), req.GetPolicies()
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeACLToken, &droverv1.ACLTokenEntry{Upserts: []*droverv1.ACLToken{t}})
	if err != nil {
		return nil, err
	}
	t.ModifyIndex = index
	return &droverv1.ACLTokenResponse{Token: forDisplay(t), Index: index}, nil
}

// DeleteToken deletes a token.
func (s *aclService) DeleteToken(ctx context.Context, req *droverv1.DeleteACLTokenRequest) (*droverv1.ACLWriteResponse, error) {
	if err := s.checkEnabled(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if s.backend.State().Snapshot().ACLToken(req.GetAccessorId()) == nil {
		return nil, fmt.Errorf("ACL token %s: %w", req.GetAccessorId(), state.ErrNotFound)
	}
	index, _, err := s.backend.Apply(ctx, droverv1.MessageTypeACLToken, &droverv1.ACLTokenEntry{Deletes: []string{req.GetAccessorId()}})
	if err != nil {
		return nil, err
	}
	return &droverv1.ACLWriteResponse{Index: index}, nil
}

// GetToken returns one token, without its secret.
func (s *aclService) GetToken(ctx context.Context, req *droverv1.GetACLTokenRequest) (*droverv1.ACLTokenResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	t, meta, err := getObject(ctx, s.services, req.GetQuery(), state.TableACLTokens, "ACL token "+req.GetAccessorId(),
		func(snap *state.Snapshot) *droverv1.ACLToken { return snap.ACLToken(req.GetAccessorId()) })
	if err != nil {
		return nil, err
	}
	return &droverv1.ACLTokenResponse{Token: forDisplay(t), Meta: meta}, nil
}

// ListTokens returns every token in accessor order, without secrets.
func (s *aclService) ListTokens(ctx context.Context, req *droverv1.ListACLTokensRequest) (*droverv1.ListACLTokensResponse, error) {
	tokens, _, meta, err := listObjects(ctx, s.services, req.GetQuery(), state.TableACLTokens,
		func(snap *state.Snapshot) ([]*droverv1.ACLToken, string) {
			tokens := slices.Collect(snap.ACLTokens())
			for i, t := range tokens {
				tokens[i] = forDisplay(t)
			}
			return tokens, ""
		})
	if err != nil {
		return nil, err
	}
	return &droverv1.ListACLTokensResponse{Tokens: tokens, Meta: meta}, nil
}

// Self returns the caller's token.
func (s *aclService) Self(ctx context.Context, _ *droverv1.ACLTokenSelfRequest) (*droverv1.ACLTokenResponse, error) {
	if err := s.checkEnabled(); err != nil {
		return nil, err
	}
	return &droverv1.ACLTokenResponse{Token: forDisplay(identityFrom(ctx).Token)}, nil
}
