package rpc

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// serverOnlyServices and serverOnlyMethods are what only servers may call:
// the leader's eval broker and plan queue, which every server's scheduler
// workers reach over gRPC, joining the raft cluster, and the leader's read
// index for followers' consistent reads. ClusterService.Info
// stays open to every verified caller: it only describes the server, and
// operators' tools use it too.
var (
	serverOnlyServices = []string{droverv1.SchedulerService_ServiceDesc.ServiceName}
	serverOnlyMethods  = map[string]bool{
		droverv1.ClusterService_Join_FullMethodName:      true,
		droverv1.ClusterService_ReadIndex_FullMethodName: true,
	}
)

// serverOnly reports whether method (a full gRPC method name) may only be
// called by servers.
func serverOnly(method string) bool {
	if serverOnlyMethods[method] {
		return true
	}
	for _, svc := range serverOnlyServices {
		if strings.HasPrefix(method, "/"+svc+"/") {
			return true
		}
	}
	return false
}

// authorizer holds server-only methods to the server identity.
type authorizer struct {
	// require fails unless the caller is a server; nil lets everyone
	// through.
	require func(ctx context.Context) error
}

// check rejects a call of a server-only method by a caller that is not a
// server.
func (a authorizer) check(ctx context.Context, method string) error {
	if a.require == nil || !serverOnly(method) {
		return nil
	}
	if err := a.require(ctx); err != nil {
		return status.Errorf(codes.PermissionDenied, "%s may only be called by servers: %v", method, err)
	}
	return nil
}

// unary is the interceptor for unary calls.
func (a authorizer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream is the interceptor for streaming calls.
func (a authorizer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
