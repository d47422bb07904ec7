package rpc

import (
	"context"

	"google.golang.org/grpc"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Codec decodes drover's requests with vtprotobuf, which, unlike the
// standard runtime, accepts strings that are not valid UTF-8 and unknown
// fields that are not well-formed. Stored, either would break every client
// built on the standard runtime (grpcurl, -json output) that later reads
// it. These interceptors refuse such a request INVALID_ARGUMENT, naming the
// field, before anything else sees it: every request message of every
// method, unary or streamed, checked over its descriptor, so that methods
// and fields added later are covered too.

// portableGate refuses requests that are not portable. Its zero value is
// ready.
type portableGate struct {
	scanners droverv1.WireScanners
}

// unary is the unary interceptor.
func (g *portableGate) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.check(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream is the stream interceptor: it checks every message the handler
// receives.
func (g *portableGate) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, portableStream{ServerStream: ss, gate: g})
}

type portableStream struct {
	grpc.ServerStream
	gate *portableGate
}

func (s portableStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.gate.check(m)
}

// check returns a *droverv1.ValidationError naming the first field of req
// that the standard runtime would refuse. Re-encoding a message with
// vtprotobuf and scanning the bytes costs a fraction of a reflection walk
// over it (BenchmarkPortableCheck); the walk runs only to name the field of
// a refused request.
func (g *portableGate) check(req any) error {
	msg := messageOf(req)
	if msg == nil {
		return nil
	}
	if vt, ok := req.(vtMarshaler); ok {
		buf := make([]byte, vt.SizeVT())
		if n, err := vt.MarshalToSizedBufferVT(buf); err == nil &&
			g.scanners.Portable(msg.ProtoReflect().Descriptor(), buf[len(buf)-n:]) {
			return nil
		}
	}
	return droverv1.CheckPortable(msg)
}
