package droverv1

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestAllocationShallowCopyKeepsEveryField sets every field of an
// allocation, as protobuf reflection lists them, and checks that the
// shallow copy holds each one, sharing the messages and lists: a field
// added to the message and forgotten in ShallowCopy fails it.
func TestAllocationShallowCopyKeepsEveryField(t *testing.T) {
	a := &Allocation{}
	m := a.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			l.Append(l.NewElement())
		case fd.IsMap():
			t.Fatalf("field %s: maps are not handled by this test", fd.Name())
		case fd.Message() != nil:
			m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		default:
			m.Set(fd, nonZero(t, fd))
		}
	}
	m.SetUnknown(protoreflect.RawFields{0xf8, 0x01, 0x01}) // field 31, varint 1
	c := a.ShallowCopy()
	if !proto.Equal(a, c) {
		t.Fatalf("the shallow copy differs from the allocation:\n%v\n%v", a, c)
	}
	if c.Resources != a.Resources || c.DeploymentStatus != a.DeploymentStatus || &c.AllocStates[0] != &a.AllocStates[0] {
		t.Error("the shallow copy does not share the allocation's messages and lists")
	}
	if (*Allocation)(nil).ShallowCopy() != nil {
		t.Error("the copy of nil is not nil")
	}
}

// nonZero returns a value other than the default for a scalar field.
func nonZero(t *testing.T, fd protoreflect.FieldDescriptor) protoreflect.Value {
	t.Helper()
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1.5)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1.5)
	}
	t.Fatalf("field %s: kind %s not handled", fd.Name(), fd.Kind())
	return protoreflect.Value{}
}
