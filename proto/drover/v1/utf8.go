package droverv1

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	return &ValidationError{Violations: []*FieldViolation{{Field: path, Description: desc}}}
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

// WireScanner tells whether encodings of one message type are portable:
// well-formed, with every string field valid UTF-8. It reads the bytes with
// protowire, guided by a table built once from the descriptor (what to do
// with each field number), without decoding them: several times cheaper
// than a walk over the decoded message. For an encoding made by MarshalVT
// it agrees with CheckPortable on the message. Safe for concurrent use.
type WireScanner struct {
	root *scanTable
}

// NewWireScanner builds the scanner of md's encodings.
func NewWireScanner(md protoreflect.MessageDescriptor) *WireScanner {
	return &WireScanner{root: newScanTable(md, map[protoreflect.FullName]*scanTable{})}
}

// Portable reports whether b is a portable encoding of the scanner's type.
// Malformed bytes are not.
func (s *WireScanner) Portable(b []byte) bool { return s.root.scan(b) }

// WireScanners keeps a WireScanner per message type, built on first use.
// The zero value is ready; it is safe for concurrent use.
type WireScanners struct {
	byType sync.Map // protoreflect.FullName -> *WireScanner
}

// Portable reports whether b is a portable encoding of a message of type
// md.
func (s *WireScanners) Portable(md protoreflect.MessageDescriptor, b []byte) bool {
	if sc, ok := s.byType.Load(md.FullName()); ok {
		return sc.(*WireScanner).Portable(b)
	}
	sc, _ := s.byType.LoadOrStore(md.FullName(), NewWireScanner(md))
	return sc.(*WireScanner).Portable(b)
}

// scanAction is what a scan checks in a length-delimited field.
type scanAction uint8

const (
	scanNothing      scanAction = iota // bytes, groups, unknown fields
	scanString                         // valid UTF-8
	scanMessage                        // a portable message (map entries too)
	scanPackedVarint                   // whole varints
	scanPacked32                       // a multiple of 4 bytes
	scanPacked64                       // a multiple of 8 bytes
)

type scanField struct {
	action scanAction
	msg    *scanTable // for scanMessage
}

// scanTable says what to check in each field of one message type. Field
// numbers below maxDenseField are looked up in a slice, larger ones in a
// map.
type scanTable struct {
	dense  []scanField
	sparse map[protowire.Number]scanField
}

const maxDenseField = 256

// newScanTable builds md's table; seen ends the recursion of message types
// that contain themselves.
func newScanTable(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]*scanTable) *scanTable {
	if t := seen[md.FullName()]; t != nil {
		return t
	}
	t := &scanTable{}
	seen[md.FullName()] = t
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := scanField{action: scanActionOf(fd)}
		switch f.action {
		case scanNothing:
			continue
		case scanMessage:
			f.msg = newScanTable(fd.Message(), seen)
		}
		if num := fd.Number(); num < maxDenseField {
			if len(t.dense) <= int(num) {
				t.dense = append(t.dense, make([]scanField, int(num)+1-len(t.dense))...)
			}
			t.dense[num] = f
		} else {
			if t.sparse == nil {
				t.sparse = map[protowire.Number]scanField{}
			}
			t.sparse[num] = f
		}
	}
	return t
}

func scanActionOf(fd protoreflect.FieldDescriptor) scanAction {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return scanString
	case protoreflect.MessageKind:
		return scanMessage
	case protoreflect.BytesKind, protoreflect.GroupKind:
		return scanNothing
	}
	// A repeated scalar arrives packed in a length-delimited field, which
	// the standard runtime parses.
	if !fd.IsList() {
		return scanNothing
	}
	switch fd.Kind() {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return scanPacked32
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return scanPacked64
	}
	return scanPackedVarint
}

func (t *scanTable) field(num protowire.Number) scanField {
	if int(num) < len(t.dense) {
		return t.dense[num]
	}
	return t.sparse[num]
}

func (t *scanTable) scan(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := scanTag(b)
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
		v, n := scanBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if !t.field(num).check(v) {
			return false
		}
	}
	return true
}

// scanTag and scanBytes decode the one-byte tags and lengths, most of them,
// inline: a quarter of the scan's time otherwise.
func scanTag(b []byte) (protowire.Number, protowire.Type, int) {
	if c := b[0]; c < 0x80 && c >= 1<<3 {
		return protowire.Number(c >> 3), protowire.Type(c & 7), 1
	}
	return consumeTag(b)
}

func scanBytes(b []byte) ([]byte, int) {
	if len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b) {
		n := 1 + int(b[0])
		return b[1:n], n
	}
	return protowire.ConsumeBytes(b)
}

// check checks the contents of one length-delimited field.
func (f scanField) check(v []byte) bool {
	switch f.action {
	case scanString:
		return utf8.Valid(v)
	case scanMessage:
		return f.msg.scan(v)
	case scanPacked32:
		return len(v)%4 == 0
	case scanPacked64:
		return len(v)%8 == 0
	case scanPackedVarint:
		for len(v) > 0 {
			_, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return false
			}
			v = v[n:]
		}
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
