package rpc

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// haltGuardedServices are the services a halted server refuses: those that
// read or write the state it can no longer vouch for. The cluster and
// operator services stay open so that operators can see what happened
// (the operator calls that write go through the server's Apply, which
// refuses too).
var haltGuardedServices = map[string]bool{
	droverv1.NodeService_ServiceDesc.ServiceName:       true,
	droverv1.JobService_ServiceDesc.ServiceName:        true,
	droverv1.DeploymentService_ServiceDesc.ServiceName: true,
	droverv1.AllocService_ServiceDesc.ServiceName:      true,
	droverv1.EvalService_ServiceDesc.ServiceName:       true,
	droverv1.EventService_ServiceDesc.ServiceName:      true,
	droverv1.SchedulerService_ServiceDesc.ServiceName:  true,
}

// haltGuard refuses the calls of the guarded services once the server has
// halted, before they are answered or forwarded.
type haltGuard struct {
	halted func() error
}

func (g haltGuard) check(fullMethod string) error {
	if g.halted == nil || !haltGuardedServices[serviceOf(fullMethod)] {
		return nil
	}
	if reason := g.halted(); reason != nil {
		return fmt.Errorf("%s: %w: %w", fullMethod, ErrFailedPrecondition, reason)
	}
	return nil
}

func (g haltGuard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.check(info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (g haltGuard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := g.check(info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// serviceOf returns the service of a full method name
// ("/drover.v1.NodeService/Register" -> "drover.v1.NodeService").
func serviceOf(fullMethod string) string {
	s := strings.TrimPrefix(fullMethod, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return s
}
