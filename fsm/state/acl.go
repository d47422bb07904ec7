package state

import (
	"encoding/hex"
	"fmt"
	"iter"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// aclBootstrapRow is the key of the ACL bootstrap table's only row.
const aclBootstrapRow = "bootstrap"

func aclBootstrapKey(*droverv1.ACLBootstrapState) string { return aclBootstrapRow }

// secretHashKey is the key of a token in the secret index: the hex of the
// SHA-256 of its secret.
func secretHashKey(t *droverv1.ACLToken) string { return hex.EncodeToString(t.GetSecretHash()) }

// BootstrapACL applies an ACLBootstrapEntry. It stores the token only while
// the stored bootstrap index equals the entry's reset index (0: ACLs were
// never bootstrapped), so that of two racing bootstraps one wins and the
// other fails with ErrPrecondition. A reset bootstrap deletes the token the
// previous bootstrap made: a lost bootstrap token is a leaked one.
func (s *StateStore) BootstrapACL(index uint64, e *droverv1.ACLBootstrapEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		t := e.GetToken()
		if t == nil || t.GetType() != droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT {
			return invalidEntry("ACL bootstrap without a management token")
		}
		old := get[*droverv1.ACLBootstrapState](tx, TableACLBootstrap, aclBootstrapRow)
		if old.GetIndex() != e.GetResetIndex() {
			if old == nil {
				return fmt.Errorf("ACL bootstrap with reset index %d: ACLs were never bootstrapped: %w", e.GetResetIndex(), ErrPrecondition)
			}
			return fmt.Errorf("ACL bootstrap already done (reset index %d): %w", old.GetIndex(), ErrPrecondition)
		}
		if prev := tx.aclToken(old.GetAccessorId()); prev != nil {
			if err := tx.delete(TableACLTokens, prev); err != nil {
				return err
			}
		}
		if err := tx.putToken(t, true); err != nil {
			return err
		}
		return tx.insert(TableACLBootstrap, &droverv1.ACLBootstrapState{Index: tx.index, AccessorId: t.GetAccessorId()})
	})
}

// ApplyACLPolicies applies an ACLPolicyEntry: deletions first, then the
// upserts, each stamped with the entry's index.
func (s *StateStore) ApplyACLPolicies(index uint64, e *droverv1.ACLPolicyEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		for _, name := range e.GetDeletes() {
			p := get[*droverv1.ACLPolicy](tx, TableACLPolicies, name)
			if p == nil {
				return fmt.Errorf("ACL policy %q: %w", name, ErrNotFound)
			}
			if err := tx.delete(TableACLPolicies, p); err != nil {
				return err
			}
		}
		for _, p := range e.GetUpserts() {
			if p.GetName() == "" {
				return invalidEntry("ACL policy without a name")
			}
			p.CreateIndex = tx.index
			if old := get[*droverv1.ACLPolicy](tx, TableACLPolicies, p.GetName()); old != nil {
				p.CreateIndex = old.GetCreateIndex()
			}
			p.ModifyIndex = tx.index
			if err := tx.insert(TableACLPolicies, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// ApplyACLTokens applies an ACLTokenEntry: deletions first, then the
// upserts. An upsert of an existing token keeps its secret hash, type,
// creation and expiry, whatever the entry says; a new one must carry a
// secret hash no other token has.
func (s *StateStore) ApplyACLTokens(index uint64, e *droverv1.ACLTokenEntry) ([]Change, error) {
	return s.write(index, func(tx *txn) error {
		for _, id := range e.GetDeletes() {
			t := tx.aclToken(id)
			if t == nil {
				return fmt.Errorf("ACL token %s: %w", id, ErrNotFound)
			}
			if err := tx.delete(TableACLTokens, t); err != nil {
				return err
			}
		}
		for _, t := range e.GetUpserts() {
			if err := tx.putToken(t, false); err != nil {
				return err
			}
		}
		return nil
	})
}

// putToken writes t, stamped with the transaction's index. A new token
// needs a fresh secret hash; an existing one keeps what never changes.
func (tx *txn) putToken(t *droverv1.ACLToken, bootstrap bool) error {
	if t.GetAccessorId() == "" {
		return invalidEntry("ACL token without an accessor id")
	}
	t.Bootstrap = bootstrap
	t.CreateIndex = tx.index
	if old := tx.aclToken(t.GetAccessorId()); old != nil {
		t.SecretHash = old.GetSecretHash()
		t.Type = old.GetType()
		t.CreateTime = old.GetCreateTime()
		t.ExpirationTime = old.GetExpirationTime()
		t.CreateIndex = old.GetCreateIndex()
		t.Bootstrap = old.GetBootstrap()
	} else {
		if len(t.GetSecretHash()) != 32 {
			return invalidEntry("ACL token %s without a SHA-256 secret hash", t.GetAccessorId())
		}
		if obj, err := tx.db.First(TableACLTokens, indexSecret, secretHashKey(t)); err != nil || obj != nil {
			return invalidEntry("ACL token %s: secret already in use", t.GetAccessorId())
		}
	}
	t.ModifyIndex = tx.index
	return tx.insert(TableACLTokens, t)
}

func (tx *txn) aclToken(accessorID string) *droverv1.ACLToken {
	if accessorID == "" {
		return nil
	}
	return get[*droverv1.ACLToken](tx, TableACLTokens, accessorID)
}

// ACLBootstrap returns the record of the last bootstrap, or nil if ACLs
// were never bootstrapped.
func (s *Snapshot) ACLBootstrap() *droverv1.ACLBootstrapState {
	return first[*droverv1.ACLBootstrapState](s, TableACLBootstrap, indexID, aclBootstrapRow)
}

// ACLPolicy returns the policy of that name, or nil.
func (s *Snapshot) ACLPolicy(name string) *droverv1.ACLPolicy {
	return first[*droverv1.ACLPolicy](s, TableACLPolicies, indexID, name)
}

// ACLPolicies iterates over every policy in name order.
func (s *Snapshot) ACLPolicies() iter.Seq[*droverv1.ACLPolicy] {
	return all[*droverv1.ACLPolicy](s, TableACLPolicies, indexID)
}

// ACLToken returns the token with that accessor id, or nil.
func (s *Snapshot) ACLToken(accessorID string) *droverv1.ACLToken {
	return first[*droverv1.ACLToken](s, TableACLTokens, indexID, accessorID)
}

// ACLTokenBySecretHash returns the token whose secret hashes to hash (a
// SHA-256), or nil.
func (s *Snapshot) ACLTokenBySecretHash(hash []byte) *droverv1.ACLToken {
	return first[*droverv1.ACLToken](s, TableACLTokens, indexSecret, hex.EncodeToString(hash))
}

// ACLTokens iterates over every token in accessor order.
func (s *Snapshot) ACLTokens() iter.Seq[*droverv1.ACLToken] {
	return all[*droverv1.ACLToken](s, TableACLTokens, indexID)
}

// ExpiredACLTokens lists the accessor ids of the tokens that expired before
// now, at most limit of them.
func (s *Snapshot) ExpiredACLTokens(now time.Time, limit int) []string {
	var out []string
	for t := range s.ACLTokens() {
		if len(out) >= limit {
			break
		}
		if exp := t.GetExpirationTime(); exp != nil && exp.AsTime().Before(now) {
			out = append(out, t.GetAccessorId())
		}
	}
	return out
}

// ACLIndex is the raft index of the last write to the ACL tables: a
// compiled ACL built from this snapshot stays right until it changes.
func (s *Snapshot) ACLIndex() uint64 {
	return max(s.TableIndex(TableACLTokens), s.TableIndex(TableACLPolicies), s.TableIndex(TableACLBootstrap))
}

// ACLBootstrap restores the record of the last ACL bootstrap.
func (r *Restorer) ACLBootstrap(b *droverv1.ACLBootstrapState) error {
	return r.tx.insert(TableACLBootstrap, b)
}

// ACLPolicy restores a policy.
func (r *Restorer) ACLPolicy(p *droverv1.ACLPolicy) error { return r.tx.insert(TableACLPolicies, p) }

// ACLToken restores a token.
func (r *Restorer) ACLToken(t *droverv1.ACLToken) error { return r.tx.insert(TableACLTokens, t) }
