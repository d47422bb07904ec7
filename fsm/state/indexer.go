package state

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Typed go-memdb indexers. Each reads the indexed value through a getter of
// the generated type, so renaming a proto field breaks the build instead of
// silently breaking an index (as a field name given as a string would).

// errInvalidKey is returned by FromArgs for an argument that cannot be a key
// of the index (a malformed UUID): such a lookup matches nothing.
var errInvalidKey = errors.New("invalid index key")

// stringIndex indexes a string returned by get. Keys end in a NUL byte so
// that "web" is not a prefix match of "web2" in exact lookups.
type stringIndex[T any] struct {
	get func(T) string
}

func (ix stringIndex[T]) FromObject(obj any) (bool, []byte, error) {
	o, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("string index: unexpected object %T", obj)
	}
	s := ix.get(o)
	if s == "" {
		return false, nil, nil
	}
	return true, stringKey(s), nil
}

func (ix stringIndex[T]) FromArgs(args ...any) ([]byte, error) {
	s, err := oneString(args)
	if err != nil {
		return nil, err
	}
	return stringKey(s), nil
}

// PrefixFromArgs makes the index usable for prefix scans (the "_prefix"
// lookups of go-memdb): the key is the prefix without the terminator.
func (ix stringIndex[T]) PrefixFromArgs(args ...any) ([]byte, error) {
	s, err := oneString(args)
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

func stringKey(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// int64Index indexes an int64 returned by get, such as a time, as 8 bytes
// that sort in numeric order, so that a scan of the index runs from the
// lowest value up.
type int64Index[T any] struct {
	get func(T) int64
}

func (ix int64Index[T]) FromObject(obj any) (bool, []byte, error) {
	o, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("int64 index: unexpected object %T", obj)
	}
	return true, int64Key(ix.get(o)), nil
}

func (ix int64Index[T]) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("int64 index: want one argument, got %d", len(args))
	}
	n, ok := args[0].(int64)
	if !ok {
		return nil, fmt.Errorf("int64 index: want an int64 argument, got %T", args[0])
	}
	return int64Key(n), nil
}

// int64Key is n big-endian with the sign bit flipped, so that negative
// numbers sort before positive ones.
func int64Key(n int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(n)^(1<<63))
}

// flagIndex holds only the objects for which has is true, so that a scan
// of it costs what they number, not what the table holds. Its schema must
// allow missing entries; it is read with no arguments.
type flagIndex[T any] struct {
	has func(T) bool
}

func (ix flagIndex[T]) FromObject(obj any) (bool, []byte, error) {
	o, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("flag index: unexpected object %T", obj)
	}
	return ix.has(o), []byte{1}, nil
}

func (ix flagIndex[T]) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 0 {
		return nil, fmt.Errorf("flag index: want no argument, got %d", len(args))
	}
	return []byte{1}, nil
}

// uuidIndex indexes a canonical lowercase UUID string as its 32 hex
// digits, one digit per key byte (0 to 15). Byte order equals the order of
// the lowercase text, so scans stay in id order. One digit per byte keeps
// each node of go-immutable-radix's tree at 16 children or fewer: a write
// copies every node on its key's path, and with a byte of two digits the
// upper nodes of a table of 100,000 ids have 256 children, which made
// every allocation report copy several kilobytes.
type uuidIndex[T any] struct {
	get func(T) string
}

func (ix uuidIndex[T]) FromObject(obj any) (bool, []byte, error) {
	o, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("uuid index: unexpected object %T", obj)
	}
	s := ix.get(o)
	if s == "" {
		return false, nil, nil
	}
	key, ok := uuidKey(s)
	if !ok {
		return false, nil, fmt.Errorf("uuid index: %q is not a lowercase UUID", s)
	}
	return true, key, nil
}

func (ix uuidIndex[T]) FromArgs(args ...any) ([]byte, error) {
	s, err := oneString(args)
	if err != nil {
		return nil, err
	}
	key, ok := uuidKey(s)
	if !ok {
		return nil, errInvalidKey
	}
	return key, nil
}

// uuidKeyLen is the length of a uuidIndex key: one byte per hex digit.
const uuidKeyLen = 32

// uuidKey decodes a canonical lowercase UUID into its 32 digits.
func uuidKey(s string) ([]byte, bool) {
	key := make([]byte, uuidKeyLen)
	if !decodeLowercaseUUID(key, s) {
		return nil, false
	}
	return key, true
}

// decodeLowercaseUUID writes the 32 digits of s into key and reports
// whether s is a canonical lowercase UUID, the only form of id the
// uuid-keyed tables and the allocation tree store.
func decodeLowercaseUUID(key []byte, s string) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	n, ok := decodeUUIDDigits(key, s)
	return ok && n == uuidKeyLen
}

// uuidLowerBound returns the smallest key whose UUID text starts with prefix
// (ignoring dashes), or false if prefix cannot start a lowercase UUID.
func uuidLowerBound(prefix string) ([]byte, bool) {
	key := make([]byte, uuidKeyLen)
	_, ok := decodeUUIDDigits(key, prefix)
	return key, ok
}

// decodeUUIDDigits writes the lowercase hex digits of s, skipping dashes,
// into key, and returns how many digits it read. Missing digits stay zero.
// It fails on any other character or on more than 32 digits.
func decodeUUIDDigits(key []byte, s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case c == '-':
			continue
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return n, false
		}
		if n == uuidKeyLen {
			return n, false
		}
		key[n] = v
		n++
	}
	return n, true
}

// versionIndex indexes a job version by job id and version number, so that
// a prefix scan on the job id lists its versions in order.
type versionIndex struct{}

func (versionIndex) FromObject(obj any) (bool, []byte, error) {
	j, ok := obj.(*jobVersion)
	if !ok {
		return false, nil, fmt.Errorf("version index: unexpected object %T", obj)
	}
	return true, versionKey(j.job.GetId(), j.job.GetVersion()), nil
}

func (versionIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("version index: want job id and version, got %d arguments", len(args))
	}
	id, ok1 := args[0].(string)
	v, ok2 := args[1].(uint64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("version index: want (string, uint64), got (%T, %T)", args[0], args[1])
	}
	return versionKey(id, v), nil
}

// PrefixFromArgs takes the job id alone and matches all of its versions.
func (versionIndex) PrefixFromArgs(args ...any) ([]byte, error) {
	id, err := oneString(args)
	if err != nil {
		return nil, err
	}
	return stringKey(id), nil
}

// versionKey is the job id, NUL, then the version as 8 big-endian bytes so
// that versions sort numerically.
func versionKey(id string, version uint64) []byte {
	key := make([]byte, len(id)+1, len(id)+9)
	copy(key, id)
	return binary.BigEndian.AppendUint64(key, version)
}

func oneString(args []any) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("index: want one argument, got %d", len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return "", fmt.Errorf("index: want a string argument, got %T", args[0])
	}
	return s, nil
}
