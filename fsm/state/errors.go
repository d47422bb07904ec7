package state

import (
	"errors"
	"fmt"
)

// Errors the write methods return. They are wrapped with the ids involved;
// test for them with errors.Is. A failed write changes nothing.
var (
	// ErrNotFound: an object the entry refers to does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSecretMismatch: a node registration presented another secret than
	// the one the node registered with.
	ErrSecretMismatch = errors.New("node secret does not match")
	// ErrConflict: the object changed after the write was decided; the
	// proposer should read the new state and decide again.
	ErrConflict = errors.New("conflicting concurrent change")
	// ErrIndexMismatch: the write was asked to apply only if an object was
	// still at a given index (a check-and-set), and it is not. Unlike
	// ErrConflict, retrying the same write cannot succeed.
	ErrIndexMismatch = errors.New("index does not match")
	// ErrPrecondition: the write is not allowed in the objects' current
	// state (promoting a deployment that is not running, or whose canaries
	// are not healthy). Retrying cannot succeed until the state changes.
	ErrPrecondition = errors.New("precondition failed")
	// ErrInvalidEntry: the entry is malformed. Proposers validate requests,
	// so this points at a bug or a corrupt entry, never at a client mistake.
	ErrInvalidEntry = errors.New("invalid raft entry")
)

func invalidEntry(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidEntry, fmt.Sprintf(format, args...))
}
