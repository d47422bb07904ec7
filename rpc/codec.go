package rpc

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Codec is the gRPC codec of drover's servers and clients. It uses the
// vtprotobuf-generated marshalling of drover's messages (several times
// faster than the reflection-based runtime) and falls back to the standard
// protobuf runtime for messages without it, such as those of the health
// and reflection services. It keeps the name "proto", so peers see no
// difference on the wire.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

type vtUnmarshaler interface {
	UnmarshalVT([]byte) error
}

// Name is the content-subtype of the codec.
func (Codec) Name() string { return "proto" }

// Marshal encodes v into pooled buffers when it is large enough to be
// worth pooling, as grpc's own codec does.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMarshaler)
	if !ok {
		return marshalStandard(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVT(buf); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes data into v. Generated UnmarshalVT copies what it keeps,
// so the pooled buffer can be freed at once.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if m, ok := v.(vtUnmarshaler); ok {
		return m.UnmarshalVT(buf.ReadOnlyData())
	}
	msg := messageOf(v)
	if msg == nil {
		return fmt.Errorf("unmarshal: %T is not a protobuf message", v)
	}
	return proto.Unmarshal(buf.ReadOnlyData(), msg)
}

func marshalStandard(v any) (mem.BufferSlice, error) {
	msg := messageOf(v)
	if msg == nil {
		return nil, fmt.Errorf("marshal: %T is not a protobuf message", v)
	}
	buf, err := proto.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
}

func messageOf(v any) proto.Message {
	switch m := v.(type) {
	case proto.Message:
		return m
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m)
	}
	return nil
}
