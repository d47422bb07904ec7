package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// marshalJSON is m in the protobuf JSON mapping (jsonOptions) without its
// deprecated fields: the nanosecond durations of releases before 0.3, kept
// in the schema only so that old data and old clients still work. With
// every field emitted they would print next to their replacements, as
// "interval_ns": "0" beside "interval": "5400s".
func marshalJSON(m proto.Message) ([]byte, error) {
	raw, err := jsonOptions.Marshal(m)
	if err != nil {
		return nil, err
	}
	drop := deprecatedFieldNames(m.ProtoReflect().Descriptor().ParentFile().Package())
	if len(drop) == 0 {
		return raw, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	if err := copyJSONValue(dec, &out, drop); err != nil {
		return nil, fmt.Errorf("dropping deprecated fields from %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return out.Bytes(), nil
}

// deprecatedFieldNames lists the .proto names of the deprecated fields of
// the package's messages, leaving out any name that a field in use also
// has, so that dropping keys by name never drops a live field.
func deprecatedFieldNames(pkg protoreflect.FullName) map[string]bool {
	deprecated, live := map[string]bool{}, map[string]bool{}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			md := ms.Get(i)
			for j := range md.Fields().Len() {
				fd := md.Fields().Get(j)
				if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok && opts.GetDeprecated() {
					deprecated[string(fd.Name())] = true
				} else {
					live[string(fd.Name())] = true
				}
			}
			walk(md.Messages())
		}
	}
	protoregistry.GlobalFiles.RangeFilesByPackage(pkg, func(fd protoreflect.FileDescriptor) bool {
		walk(fd.Messages())
		return true
	})
	for name := range live {
		delete(deprecated, name)
	}
	return deprecated
}

// copyJSONValue copies the next JSON value from dec to out, leaving out the
// members of objects whose key is in drop. Order is kept.
func copyJSONValue(dec *json.Decoder, out *bytes.Buffer, drop map[string]bool) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return writeJSONScalar(out, tok)
	}
	switch delim {
	case '{':
		out.WriteByte('{')
		first := true
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return err
			}
			key, ok := keyTok.(string)
			if !ok {
				return fmt.Errorf("object key %v is not a string", keyTok)
			}
			if drop[key] {
				if err := copyJSONValue(dec, &bytes.Buffer{}, drop); err != nil {
					return err
				}
				continue
			}
			if !first {
				out.WriteByte(',')
			}
			first = false
			if err := writeJSONScalar(out, key); err != nil {
				return err
			}
			out.WriteByte(':')
			if err := copyJSONValue(dec, out, drop); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	case '[':
		out.WriteByte('[')
		for i := 0; dec.More(); i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := copyJSONValue(dec, out, drop); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	default:
		return fmt.Errorf("unexpected %v", delim)
	}
	// The closing delimiter.
	if _, err := dec.Token(); err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// writeJSONScalar writes a string, number, bool or null token as JSON,
// without encoding/json's escaping of <, > and &, which protojson does not
// do either: the output stays the same byte for byte.
func writeJSONScalar(out *bytes.Buffer, tok json.Token) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tok); err != nil {
		return err
	}
	out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return nil
}
