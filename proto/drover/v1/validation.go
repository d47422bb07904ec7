package droverv1

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ValidationError lists the field violations of one request. The rpc layer
// turns it into INVALID_ARGUMENT with a BadRequest detail per violation.
type ValidationError struct {
	Violations []*FieldViolation
}

// Error joins the violations into one line, naming every field.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.Field + ": " + v.Description
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Limits on sizes of request fields. They keep one request from holding a
// server's memory hostage and keep raft entries small.
const (
	maxNameLen        = 128
	maxLongTextLen    = 1024
	maxMapEntries     = 512
	maxMapKeyLen      = 256
	maxMapValueLen    = 4096
	maxListLen        = 1024
	maxAllocsPerCall  = 10000
	maxPageSize       = 10000
	maxPortNumber     = 65535
	maxPriority       = 100
	maxSpreadWeight   = 100
	maxPercent        = 100
	maxJobTaskGroups  = 256
	maxGroupCount     = 1_000_000
	maxEventKeysTopic = 1024
)

// violations collects field violations while a request is checked.
type violations struct {
	list []*FieldViolation
}

func (v *violations) add(field, format string, args ...any) {
	v.list = append(v.list, &FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// err returns nil when nothing was wrong, so callers can return it directly.
func (v *violations) err() error {
	if len(v.list) == 0 {
		return nil
	}
	return &ValidationError{Violations: v.list}
}

// IsUUID reports whether s is a UUID in canonical form: 36 characters,
// lowercase. The state store keys objects by the UUID's bytes, so one
// canonical spelling keeps every id unambiguous.
func IsUUID(s string) bool {
	if len(s) != 36 || strings.ToLower(s) != s {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// isIdentifier reports whether s may name something operators choose (job
// ids, group names, datacenters, labels): a letter or digit, then letters,
// digits, '_', '.' and '-'. Such names are safe in CLIs, file names and logs.
func isIdentifier(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return s != ""
}

func (v *violations) uuid(field, s string) {
	switch {
	case s == "":
		v.add(field, "is required")
	case !IsUUID(s):
		v.add(field, "must be a lowercase UUID (36 characters, e.g. 0f8fad5b-d9cb-469f-a165-70867728950e)")
	}
}

// validIdentifier reports whether identifier would accept s.
func validIdentifier(s string) bool {
	return s != "" && len(s) <= maxNameLen && isIdentifier(s)
}

func (v *violations) identifier(field, s string) {
	switch {
	case s == "":
		v.add(field, "is required")
	case len(s) > maxNameLen:
		v.add(field, "must be at most %d characters", maxNameLen)
	case !isIdentifier(s):
		v.add(field, "must start with a letter or digit and contain only letters, digits, '_', '.' and '-'")
	}
}

func (v *violations) text(field, s string, limit int, required bool) {
	switch {
	case required && s == "":
		v.add(field, "is required")
	case len(s) > limit:
		v.add(field, "must be at most %d characters", limit)
	case strings.ContainsRune(s, 0):
		v.add(field, "must not contain NUL characters")
	}
}

func (v *violations) stringMap(field string, m map[string]string) {
	if len(m) > maxMapEntries {
		v.add(field, "must have at most %d entries", maxMapEntries)
		return
	}
	for k, val := range m {
		if k == "" || len(k) > maxMapKeyLen {
			v.add(field, "keys must be 1 to %d characters", maxMapKeyLen)
			return
		}
		if len(val) > maxMapValueLen {
			v.add(field+"["+k+"]", "must be at most %d characters", maxMapValueLen)
			return
		}
	}
}

func (v *violations) nonNegative(field string, n int64) {
	if n < 0 {
		v.add(field, "must not be negative")
	}
}

// duration checks a duration that must be valid and not negative, and
// returns it (0 when unset or invalid).
func (v *violations) duration(field string, d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	if err := d.CheckValid(); err != nil {
		v.add(field, "is not a valid duration: %v", err)
		return 0
	}
	x := d.AsDuration()
	if x < 0 {
		v.add(field, "must not be negative, not %s", x)
		return 0
	}
	return x
}

func (v *violations) port(field string, p int32, allowZero bool) {
	if (p == 0 && !allowZero) || p < 0 || p > maxPortNumber {
		if allowZero {
			v.add(field, "must be 0 (dynamic) or a port from 1 to %d", maxPortNumber)
		} else {
			v.add(field, "must be a port from 1 to %d", maxPortNumber)
		}
	}
}

func (v *violations) enum(field string, value int32, known map[int32]string) {
	if value == 0 {
		v.add(field, "is required")
	} else if _, ok := known[value]; !ok {
		v.add(field, "has unknown value %d", value)
	}
}
