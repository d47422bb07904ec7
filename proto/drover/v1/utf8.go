package droverv1

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Proto3 strings must hold valid UTF-8: the standard protobuf runtime
// refuses to marshal or unmarshal anything else, and it refuses to decode
// unknown fields that are not well-formed protobuf. vtprotobuf's generated
// decoder checks neither, so one such string or field accepted and stored
// would break every reflection-based client (grpcurl, JSON output) reading
// it. The helpers here check for both generically, over the message
// descriptors, so that every field added later is covered. A message that
// passes is "portable": any protobuf runtime reads it.

// utf8Replacement replaces each run of invalid bytes when a string is
// repaired.
const utf8Replacement = "\uFFFD"

// Descriptions of the violations CheckPortable reports.
const (
	invalidUTF8String  = "must be valid UTF-8"
	invalidUTF8MapKey  = "map key must be valid UTF-8"
	malformedUnknown   = "holds unknown fields that are not well-formed protobuf"
	requestPathUnknown = "(request)"
)

// CheckPortable returns nil when every string in m (nested messages,
// repeated fields, map keys and values, oneofs) is valid UTF-8 and every
// message's unknown fields are well-formed. Otherwise it returns a
// *ValidationError naming the first offending field in field-number order,
// e.g. `node.attributes["kernel.name"]`. The contents of unknown fields are
// not interpreted: no runtime reads them as strings.
func CheckPortable(m proto.Message) error {
	if m == nil {
		return nil
	}
	rm := m.ProtoReflect()
	if portable(rm) {
		return nil
	}
	// Only a refused message pays for the ordered walk and the path.
	path, desc := firstNonPortable(rm)
	if path == "" {
		path = requestPathUnknown
	}
	return &ValidationError{Violations: []FieldViolation{{Field: path, Description: desc}}}
}

// portable walks m without building paths or allocating.
func portable(m protoreflect.Message) bool {
	if !wellFormed(m.GetUnknown()) {
		return false
	}
	ok := true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		ok = portableField(fd, v)
		return ok
	})
	return ok
}

func portableField(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	switch {
	case fd.IsList():
		l := v.List()
		for i := range l.Len() {
			if !portableValue(fd, l.Get(i)) {
				return false
			}
		}
		return true
	case fd.IsMap():
		ok := true
		key, val := fd.MapKey(), fd.MapValue()
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			ok = portableValue(key, k.Value()) && portableValue(val, mv)
			return ok
		})
		return ok
	}
	return portableValue(fd, v)
}

func portableValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return utf8.ValidString(v.String())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return portable(v.Message())
	}
	return true
}

// wellFormed reports whether b is a sequence of well-formed fields, as the
// standard runtime requires of unknown fields.
func wellFormed(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

// consumeTag is protowire.ConsumeTag refusing field numbers above the
// largest valid one, as the standard runtime does.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}

// firstNonPortable returns the path of the first offending field of m in
// field-number order (map entries in key order) and what is wrong with it.
// The path is empty when m's own unknown fields are at fault, and the
// description is empty when nothing is.
func firstNonPortable(m protoreflect.Message) (path, desc string) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		name := string(fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			for j := range l.Len() {
				if p, d := nonPortableValue(fd, l.Get(j)); d != "" {
					return name + "[" + strconv.Itoa(j) + "]" + p, d
				}
			}
		case fd.IsMap():
			for _, e := range sortedEntries(v.Map()) {
				key := name + "[" + formatMapKey(e.key) + "]"
				if _, d := nonPortableValue(fd.MapKey(), e.key.Value()); d != "" {
					return key, invalidUTF8MapKey
				}
				if p, d := nonPortableValue(fd.MapValue(), e.value); d != "" {
					return key + p, d
				}
			}
		default:
			if p, d := nonPortableValue(fd, v); d != "" {
				return name + p, d
			}
		}
	}
	if !wellFormed(m.GetUnknown()) {
		return "", malformedUnknown
	}
	return "", ""
}

// nonPortableValue returns the path below one value (empty for a string)
// and the violation, or an empty violation when the value is portable.
func nonPortableValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (path, desc string) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if !utf8.ValidString(v.String()) {
			return "", invalidUTF8String
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		p, d := firstNonPortable(v.Message())
		if d != "" && p != "" {
			p = "." + p
		}
		return p, d
	}
	return "", ""
}

// formatMapKey spells a map key in a path. String keys are quoted with Go
// escapes, so that the path itself is valid UTF-8 whatever the key holds.
func formatMapKey(k protoreflect.MapKey) string {
	if s, ok := k.Interface().(string); ok {
		return strconv.Quote(s)
	}
	return k.String()
}

type mapEntry struct {
	key   protoreflect.MapKey
	value protoreflect.Value
}

// sortedEntries returns a map's entries in key order, so that walks over
// it do not depend on Go's random map order.
func sortedEntries(m protoreflect.Map) []mapEntry {
	entries := make([]mapEntry, 0, m.Len())
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		entries = append(entries, mapEntry{k, v})
		return true
	})
	slices.SortFunc(entries, func(a, b mapEntry) int { return compareMapKeys(a.key, b.key) })
	return entries
}

func compareMapKeys(a, b protoreflect.MapKey) int {
	switch av := a.Interface().(type) {
	case string:
		return strings.Compare(av, b.Interface().(string))
	case bool:
		bv := b.Interface().(bool)
		switch {
		case av == bv:
			return 0
		case !av:
			return -1
		}
		return 1
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	}
	return cmp.Compare(a.Uint(), b.Uint())
}

// PortableWire reports whether b, the encoding of a message of type md, is
// portable: well-formed, with every string field valid UTF-8. It reads the
// bytes with protowire, guided by the descriptor, without decoding them,
// which is much cheaper than a walk over the decoded message. For an
// encoding made by MarshalVT it agrees with CheckPortable on the message.
func PortableWire(md protoreflect.MessageDescriptor, b []byte) bool {
	fields := md.Fields()
	at := 0
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return false
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		fd := nextField(fields, &at, num)
		if fd == nil {
			continue
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return false
			}
		case protoreflect.MessageKind:
			// A map entry is a message of its own descriptor.
			if !PortableWire(fd.Message(), v) {
				return false
			}
		case protoreflect.BytesKind, protoreflect.GroupKind:
		default:
			if fd.IsList() && !wellFormedPacked(fd.Kind(), v) {
				return false
			}
		}
	}
	return true
}

// nextField returns the field numbered num. Encoders write fields in number
// order, and descriptors list them mostly in that order too, so it walks
// forward from the field last found (*at; repeated fields repeat it) and
// asks the descriptor's map, which costs several times more, only when the
// walk passes num.
func nextField(fields protoreflect.FieldDescriptors, at *int, num protowire.Number) protoreflect.FieldDescriptor {
	for i := *at; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if n := fd.Number(); n == num {
			*at = i
			return fd
		} else if n > num {
			break
		}
	}
	fd := fields.ByNumber(num)
	if fd != nil {
		*at = fd.Index()
	}
	return fd
}

// wellFormedPacked reports whether b holds whole packed values of kind k,
// as the standard runtime requires.
func wellFormedPacked(k protoreflect.Kind, b []byte) bool {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return len(b)%4 == 0
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return len(b)%8 == 0
	}
	for len(b) > 0 {
		_, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

// MakePortable repairs m in place so that CheckPortable accepts it: the
// invalid bytes of every string are replaced with U+FFFD
// (strings.ToValidUTF8) and malformed unknown fields are dropped. It
// returns how many strings and unknown-field sets it changed. The result is
// the same on every server: a map key that repairs to a key already present
// loses to it, and among repaired keys the smallest original key (in byte
// order) wins.
func MakePortable(m proto.Message) int {
	if m == nil {
		return 0
	}
	return repairMessage(m.ProtoReflect())
}

func repairMessage(m protoreflect.Message) int {
	repaired := 0
	if !wellFormed(m.GetUnknown()) {
		m.SetUnknown(nil)
		repaired++
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if nv, n := repairValue(fd, l.Get(i)); n > 0 {
					l.Set(i, nv)
					repaired += n
				}
			}
		case fd.IsMap():
			repaired += repairMap(fd, v.Map())
		default:
			if nv, n := repairValue(fd, v); n > 0 {
				m.Set(fd, nv)
				repaired += n
			}
		}
		return true
	})
	return repaired
}

// repairValue repairs one string or message value; it returns the value to
// store and how many things changed.
func repairValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (protoreflect.Value, int) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s := v.String(); !utf8.ValidString(s) {
			return protoreflect.ValueOfString(strings.ToValidUTF8(s, utf8Replacement)), 1
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return v, repairMessage(v.Message())
	}
	return v, 0
}

func repairMap(fd protoreflect.FieldDescriptor, m protoreflect.Map) int {
	repaired := 0
	// The map is changed only after the walk: protoreflect leaves changes
	// during Range undefined.
	var moved []mapEntry
	for _, e := range sortedEntries(m) {
		nv, n := repairValue(fd.MapValue(), e.value)
		repaired += n
		if s, ok := e.key.Interface().(string); ok && !utf8.ValidString(s) {
			m.Clear(e.key)
			moved = append(moved, mapEntry{e.key, nv})
			continue
		}
		if n > 0 {
			m.Set(e.key, nv)
		}
	}
	// In key order, so that the smallest original key wins a collision.
	for _, e := range moved {
		key := protoreflect.ValueOfString(strings.ToValidUTF8(e.key.String(), utf8Replacement)).MapKey()
		if !m.Has(key) {
			m.Set(key, e.value)
		}
		repaired++
	}
	return repaired
}
