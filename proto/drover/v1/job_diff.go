package droverv1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// SpecChanges lists the fields whose values differ between two versions of
// a job's specification, in field order; the fields the servers own are
// left out. It walks the messages' descriptors, so a field added to the job
// later is compared without anyone remembering to.
func SpecChanges(old, new *Job) []*FieldChange {
	a, b := old.CloneVT(), new.CloneVT()
	a.ClearServerFields()
	b.ClearServerFields()
	var d differ
	d.message("", a.ProtoReflect(), b.ProtoReflect())
	return d.changes
}

// differ collects the changes found by a walk over two messages.
type differ struct {
	changes []*FieldChange
}

func (d *differ) add(path, old, new string) {
	d.changes = append(d.changes, &FieldChange{Path: path, Old: old, New: new})
}

// message compares two messages of one type field by field. Either may be
// invalid (unset), which reads as an empty message.
func (d *differ) message(path string, a, b protoreflect.Message) {
	fields := a.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		fpath := joinFieldPath(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			d.mapField(fpath, fd, a.Get(fd).Map(), b.Get(fd).Map())
		case fd.IsList():
			d.listField(fpath, fd, a.Get(fd).List(), b.Get(fd).List())
		case fd.Message() != nil && !isAtomicMessage(fd.Message()):
			if !a.Has(fd) && !b.Has(fd) {
				continue
			}
			d.message(fpath, a.Get(fd).Message(), b.Get(fd).Message())
		default:
			old, new := fieldText(a, fd), fieldText(b, fd)
			if old != new {
				d.add(fpath, old, new)
			}
		}
	}
}

// mapField compares map entries by key.
func (d *differ) mapField(path string, fd protoreflect.FieldDescriptor, a, b protoreflect.Map) {
	keys := map[string]protoreflect.MapKey{}
	for _, m := range []protoreflect.Map{a, b} {
		m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys[k.String()] = k
			return true
		})
	}
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		k := keys[name]
		old, new := "", ""
		if a.Has(k) {
			old = valueText(fd.MapValue(), a.Get(k))
		}
		if b.Has(k) {
			new = valueText(fd.MapValue(), b.Get(k))
		}
		if old != new {
			d.add(fmt.Sprintf("%s[%s]", path, name), old, new)
		}
	}
}

// listField compares lists of named messages (task groups, tasks) element
// by name, so that reordering them is no change and a changed group is
// reported field by field; any other list is one value.
func (d *differ) listField(path string, fd protoreflect.FieldDescriptor, a, b protoreflect.List) {
	nameField := namedElement(fd)
	if nameField == nil {
		old, new := listText(fd, a), listText(fd, b)
		if old != new {
			d.add(path, old, new)
		}
		return
	}
	byName := func(l protoreflect.List) (map[string]protoreflect.Message, []string) {
		m := make(map[string]protoreflect.Message, l.Len())
		var order []string
		for i := range l.Len() {
			msg := l.Get(i).Message()
			name := msg.Get(nameField).String()
			if _, dup := m[name]; !dup {
				order = append(order, name)
			}
			m[name] = msg
		}
		return m, order
	}
	olds, oldOrder := byName(a)
	news, newOrder := byName(b)
	for _, name := range oldOrder {
		epath := fmt.Sprintf("%s[%s]", path, name)
		if n, ok := news[name]; ok {
			d.message(epath, olds[name], n)
		} else {
			d.add(epath, messageText(olds[name].Interface()), "")
		}
	}
	for _, name := range newOrder {
		if _, ok := olds[name]; !ok {
			d.add(fmt.Sprintf("%s[%s]", path, name), "", messageText(news[name].Interface()))
		}
	}
}

// namedElement returns the name field of a list's element type when
// elements are identified by it, or nil.
func namedElement(fd protoreflect.FieldDescriptor) protoreflect.FieldDescriptor {
	md := fd.Message()
	if md == nil {
		return nil
	}
	name := md.Fields().ByName("name")
	if name == nil || name.Kind() != protoreflect.StringKind || name.IsList() {
		return nil
	}
	return name
}

// isAtomicMessage reports message types compared as one value: the
// well-known types, whose fields mean nothing on their own.
func isAtomicMessage(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

// fieldText renders a singular field's value, or "" when it is not set: a
// field without presence is not set when it holds its zero value.
func fieldText(m protoreflect.Message, fd protoreflect.FieldDescriptor) string {
	if !m.Has(fd) {
		return ""
	}
	return valueText(fd, m.Get(fd))
}

// valueText renders one value of fd in the protobuf JSON mapping.
func valueText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch {
	case fd.Message() != nil:
		return messageText(v.Message().Interface())
	case fd.Kind() == protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return fmt.Sprint(int32(v.Enum()))
	case fd.Kind() == protoreflect.StringKind:
		return fmt.Sprintf("%q", v.String())
	}
	return v.String()
}

// listText renders a whole list, "" when it is empty.
func listText(fd protoreflect.FieldDescriptor, l protoreflect.List) string {
	if l.Len() == 0 {
		return ""
	}
	parts := make([]string, l.Len())
	for i := range l.Len() {
		parts[i] = valueText(fd, l.Get(i))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// messageText renders a message in the protobuf JSON mapping on one line.
func messageText(m proto.Message) string {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		// Only invalid UTF-8 fails, which stored jobs never hold.
		return fmt.Sprintf("<%v>", err)
	}
	// protojson adds random spaces to keep its output from being relied on
	// byte for byte; a diff compares the compact form.
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return out.String()
}

func joinFieldPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
