// Package acltest calls any drover RPC by its method name with an empty
// request, for tests of access control: the enforcer decides before the
// request is read, so an empty request shows whether a call is let in.
package acltest

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Invoke calls method (a full gRPC method name) on conn with an empty
// request and returns the call's error. A server-streaming method is
// opened, and its first answer awaited.
func Invoke(ctx context.Context, conn grpc.ClientConnInterface, method string) error {
	md, err := methodDescriptor(method)
	if err != nil {
		return err
	}
	req, err := newMessage(md.Input())
	if err != nil {
		return err
	}
	resp, err := newMessage(md.Output())
	if err != nil {
		return err
	}
	if !md.IsStreamingServer() {
		return conn.Invoke(ctx, method, req, resp)
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: md.IsStreamingClient()}, method)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(req); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	return stream.RecvMsg(resp)
}

// methodDescriptor finds "/pkg.Service/Method" in the registry.
func methodDescriptor(method string) (protoreflect.MethodDescriptor, error) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, fmt.Errorf("method %q is not /service/method", method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("service of %s: %w", method, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("service %s has no method %s", svc, name)
	}
	return md, nil
}

func newMessage(d protoreflect.MessageDescriptor) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		return nil, fmt.Errorf("message %s: %w", d.FullName(), err)
	}
	return mt.New().Interface(), nil
}
