package audit

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

const (
	// maxIDs caps the ids of one request: the line is for finding the call,
	// not for a copy of the request.
	maxIDs = 64
	// maxElements is how many elements of each repeated field or map are
	// looked into; a plan with thousands of allocations must not cost the
	// audit line a walk over all of them.
	maxElements = 16
)

// RequestIDs returns the ids a request names: every non-empty string field
// whose proto field name is "id" or ends in "_id", at any depth of nested
// messages, keyed by its dotted field path ("job.id", "node_id",
// "deployment_id"). Elements of repeated fields are named by their index
// ("allocs.0.alloc_id"), entries of maps by their key; only the first 16
// elements of each are looked at (for maps, the 16 smallest keys). At most 64
// ids are returned, the first ones in field-number order, depth first.
//
// Secrets are never included: a field whose name contains "secret" or
// "token" is skipped with everything under it ("secret_id" is not an id).
//
// RequestIDs returns nil when the request names no id.
func RequestIDs(m proto.Message) map[string]string {
	if m == nil {
		return nil
	}
	r := m.ProtoReflect()
	if !r.IsValid() {
		return nil
	}
	var w idWalker
	w.message(r, make([]byte, 0, 128))
	if len(w.found) == 0 {
		return nil
	}
	ids := make(map[string]string, len(w.found))
	for _, id := range w.found {
		ids[id.path] = id.value
	}
	return ids
}

// idWalker collects ids in walk order. It keeps them in a slice until the
// end so the map is made once at its final size rather than grown. The path
// buffer is reused down the walk so a path string is built only for an id
// found.
type idWalker struct {
	found []foundID
}

type foundID struct{ path, value string }

func (w *idWalker) full() bool { return len(w.found) >= maxIDs }

func (w *idWalker) add(path []byte, v string) {
	if v == "" || w.full() {
		return
	}
	w.found = append(w.found, foundID{string(path), v})
}

// message walks the fields of m that may lead to an id, in field-number
// order. It goes through the descriptor rather than m.Range because Range's
// order is unspecified, and the order decides which ids survive the cap.
func (w *idWalker) message(m protoreflect.Message, path []byte) {
	for _, fd := range idFields(m.Descriptor()) {
		if w.full() {
			return
		}
		if !m.Has(fd) {
			continue
		}
		p := appendSegment(path, string(fd.Name()))
		switch {
		case fd.IsList():
			w.list(fd, m.Get(fd).List(), p)
		case fd.IsMap():
			w.mapEntries(fd, m.Get(fd).Map(), p)
		default:
			w.value(fd, m.Get(fd), p)
		}
	}
}

// value handles a singular value or one element of a list or map; fd is the
// field (for a map, its value field) that holds it.
func (w *idWalker) value(fd protoreflect.FieldDescriptor, v protoreflect.Value, path []byte) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		w.add(path, v.String())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		w.message(v.Message(), path)
	}
}

func (w *idWalker) list(fd protoreflect.FieldDescriptor, l protoreflect.List, path []byte) {
	for i := 0; i < l.Len() && i < maxElements && !w.full(); i++ {
		w.value(fd, l.Get(i), strconv.AppendInt(append(path, '.'), int64(i), 10))
	}
}

func (w *idWalker) mapEntries(fd protoreflect.FieldDescriptor, m protoreflect.Map, path []byte) {
	for _, k := range smallestKeys(m, maxElements) {
		if w.full() {
			return
		}
		w.value(fd.MapValue(), m.Get(k), appendSegment(path, k.String()))
	}
}

// smallestKeys returns the n smallest keys of m in order: Go maps have no
// order, and taking the first n keys a range yields would make the ids of
// one request differ from line to line.
func smallestKeys(m protoreflect.Map, n int) []protoreflect.MapKey {
	keys := make([]protoreflect.MapKey, 0, min(m.Len(), n)+1)
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		i, _ := slices.BinarySearchFunc(keys, k, compareKeys)
		if i < n {
			keys = slices.Insert(keys, i, k)
			if len(keys) > n {
				keys = keys[:n]
			}
		}
		return true
	})
	return keys
}

// compareKeys orders map keys, which are all of one kind: bool, a signed or
// unsigned integer, or string.
func compareKeys(a, b protoreflect.MapKey) int {
	switch av := a.Interface().(type) {
	case string:
		return strings.Compare(av, b.String())
	case bool:
		if av == b.Bool() {
			return 0
		} else if av {
			return 1
		}
		return -1
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	default:
		return cmp.Compare(a.Uint(), b.Uint())
	}
}

// appendSegment appends ".name" to path, or just name at the top. The walk
// uses path like a stack: what lies past len(path) in its array is scratch
// for the field being looked at, overwritten by the next sibling once the
// ids found under it have been copied into strings.
func appendSegment(path []byte, name string) []byte {
	if len(path) > 0 {
		path = append(path, '.')
	}
	return append(path, name...)
}

// isIDName reports whether a field of this name holds an id.
func isIDName(name string) bool {
	name = strings.ToLower(name)
	return name == "id" || strings.HasSuffix(name, "_id")
}

// isSecretName reports whether a field of this name may hold a secret
// (secret_id, token, eval_token), which must never reach the log.
func isSecretName(name string) bool {
	name = strings.ToLower(name)
	return strings.Contains(name, "secret") || strings.Contains(name, "token")
}

// idFields returns the fields of md that can lead to an id: a string field
// (or list or map of strings) with an id name, or a message field whose type
// has one somewhere below it. The walk looks at no other field, so a job's
// task groups, tasks and resources, which hold no id, cost nothing, and an
// allocation costs its seven candidate fields rather than all twenty-six.
func idFields(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	if v, ok := fieldsCache.Load(md); ok {
		return v.([]protoreflect.FieldDescriptor)
	}
	var fds []protoreflect.FieldDescriptor
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fieldHolds(fd, nil) {
			fds = append(fds, fd)
		}
	}
	slices.SortFunc(fds, func(a, b protoreflect.FieldDescriptor) int { return cmp.Compare(a.Number(), b.Number()) })
	fieldsCache.Store(md, fds)
	return fds
}

// The caches below are keyed by descriptor: their answers depend only on the
// schema, and a server has a fixed, small set of message types.
var (
	fieldsCache sync.Map // protoreflect.MessageDescriptor -> []protoreflect.FieldDescriptor
	holdsCache  sync.Map // protoreflect.MessageDescriptor -> bool
)

func fieldHolds(fd protoreflect.FieldDescriptor, visiting map[protoreflect.MessageDescriptor]bool) bool {
	name := string(fd.Name())
	if isSecretName(name) {
		return false
	}
	vd := fd
	if fd.IsMap() {
		vd = fd.MapValue() // its name is "value": the map's name counts
	}
	switch vd.Kind() {
	case protoreflect.StringKind:
		return isIDName(name)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return messageHolds(vd.Message(), visiting)
	}
	return false
}

// messageHolds reports whether a message of type md can hold an id.
func messageHolds(md protoreflect.MessageDescriptor, visiting map[protoreflect.MessageDescriptor]bool) bool {
	if v, ok := holdsCache.Load(md); ok {
		return v.(bool)
	}
	if visiting[md] {
		// A recursive type: assume it holds ids. A wrong yes costs only a
		// walk that finds nothing; a wrong no, cached, would lose ids.
		return true
	}
	if visiting == nil {
		visiting = make(map[protoreflect.MessageDescriptor]bool)
	}
	visiting[md] = true
	found := false
	fields := md.Fields()
	for i := 0; i < fields.Len() && !found; i++ {
		found = fieldHolds(fields.Get(i), visiting)
	}
	delete(visiting, md)
	holdsCache.Store(md, found)
	return found
}
