package rpc

import (
	"strings"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// callClass is who a call serves, which decides the bound it counts
// against.
type callClass int

const (
	// classServer is the cluster's own traffic (scheduler workers reaching
	// the leader's broker and plan queue, joining, autopilot's probes) and
	// health checks: never bounded, so that no flood can cut it off.
	classServer callClass = iota
	// classAgent is agents' heartbeats, registrations, allocation reports
	// and allocation long polls: bounded generously, apart from operators.
	classAgent
	// classOperator is everything else, reads and writes: bounded tightly.
	classOperator
)

func (c callClass) String() string {
	switch c {
	case classServer:
		return "server"
	case classAgent:
		return "agent"
	}
	return "operator"
}

// agentMethods are the calls agents make for their nodes.
var agentMethods = map[string]bool{
	droverv1.NodeService_Register_FullMethodName:     true,
	droverv1.NodeService_UpdateStatus_FullMethodName: true,
	droverv1.NodeService_UpdateAlloc_FullMethodName:  true,
	droverv1.NodeService_GetAllocs_FullMethodName:    true,
}

// serverServices are the services of the server class.
var serverServices = []string{
	droverv1.SchedulerService_ServiceDesc.ServiceName,
	droverv1.ClusterService_ServiceDesc.ServiceName,
	healthpb.Health_ServiceDesc.ServiceName,
}

// classOf classifies a call by its full method name.
func classOf(method string) callClass {
	if agentMethods[method] {
		return classAgent
	}
	for _, svc := range serverServices {
		if strings.HasPrefix(method, "/"+svc+"/") {
			return classServer
		}
	}
	return classOperator
}

// blockingQuery reports whether req asks to wait for a change past an
// index: such a call holds no slot while it waits.
func blockingQuery(req any) bool {
	switch r := req.(type) {
	case *droverv1.GetAllocsRequest:
		return r.GetMinIndex() > 0
	case queryRequest:
		return r.GetQuery().GetMinIndex() > 0
	}
	return false
}
