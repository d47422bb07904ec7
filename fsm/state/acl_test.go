package state

import (
	"crypto/sha256"
	"errors"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func testToken(accessor, secret string, typ droverv1.ACLTokenType) *droverv1.ACLToken {
	h := sha256.Sum256([]byte(secret))
	return &droverv1.ACLToken{AccessorId: accessor, SecretHash: h[:], Type: typ}
}

// TestBootstrapACL: of two bootstraps expecting a fresh cluster one
// applies; a reset names the current index, and deletes the previous
// bootstrap token.
func TestBootstrapACL(t *testing.T) {
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	mgmt := droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT
	if _, err := s.BootstrapACL(10, &droverv1.ACLBootstrapEntry{Token: testToken("a", "sa", mgmt)}); err != nil {
		t.Fatal(err)
	}
	_, err = s.BootstrapACL(11, &droverv1.ACLBootstrapEntry{Token: testToken("b", "sb", mgmt)})
	if !errors.Is(err, ErrPrecondition) {
		t.Fatalf("second bootstrap from 0: %v, want ErrPrecondition", err)
	}
	if s.Snapshot().ACLToken("b") != nil {
		t.Fatal("the refused bootstrap's token was stored")
	}
	if _, err := s.BootstrapACL(12, &droverv1.ACLBootstrapEntry{Token: testToken("c", "sc", mgmt), ResetIndex: 9}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("reset with a stale index: %v, want ErrPrecondition", err)
	}
	if _, err := s.BootstrapACL(13, &droverv1.ACLBootstrapEntry{Token: testToken("d", "sd", mgmt), ResetIndex: 10}); err != nil {
		t.Fatalf("reset with the current index: %v", err)
	}
	snap := s.Snapshot()
	if snap.ACLToken("a") != nil || snap.ACLToken("d") == nil || snap.ACLBootstrap().GetIndex() != 13 {
		t.Fatalf("after the reset: old token %v, new %v, bootstrap %v", snap.ACLToken("a"), snap.ACLToken("d"), snap.ACLBootstrap())
	}
}

// TestApplyACLTokens: an update keeps what never changes; a new token
// needs a fresh secret hash; deleting an unknown token changes nothing.
func TestApplyACLTokens(t *testing.T) {
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	client := droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT
	if _, err := s.ApplyACLTokens(5, &droverv1.ACLTokenEntry{Upserts: []*droverv1.ACLToken{testToken("a", "s1", client)}}); err != nil {
		t.Fatal(err)
	}
	forged := testToken("a", "other", droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT)
	forged.Name = "renamed"
	if _, err := s.ApplyACLTokens(6, &droverv1.ACLTokenEntry{Upserts: []*droverv1.ACLToken{forged}}); err != nil {
		t.Fatal(err)
	}
	got := s.Snapshot().ACLToken("a")
	want := sha256.Sum256([]byte("s1"))
	if got.GetName() != "renamed" || got.GetType() != client || string(got.GetSecretHash()) != string(want[:]) || got.GetCreateIndex() != 5 {
		t.Fatalf("updated token %v: want the name changed and the type, secret hash and create index kept", got)
	}
	if s.Snapshot().ACLTokenBySecretHash(want[:]).GetAccessorId() != "a" {
		t.Fatal("the token is not found by its secret hash")
	}
	_, err = s.ApplyACLTokens(7, &droverv1.ACLTokenEntry{Upserts: []*droverv1.ACLToken{testToken("b", "s1", client)}})
	if !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("a second token with the same secret: %v, want ErrInvalidEntry", err)
	}
	if _, err := s.ApplyACLTokens(8, &droverv1.ACLTokenEntry{Deletes: []string{"a", "nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting an unknown token: %v, want ErrNotFound", err)
	}
	if s.Snapshot().ACLToken("a") == nil {
		t.Fatal("a refused entry deleted a token")
	}
}
