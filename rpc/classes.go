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
	// classList is operators' whole-table reads (lists, the state digest):
	// each serialises or hashes a table, so they are bounded tightly.
	classList
	// classOperator is every other call, reads of one object and writes:
	// cheap, bounded only so that a flood cannot hold unbounded memory.
	classOperator
)

func (c callClass) String() string {
	switch c {
	case classServer:
		return "server"
	case classAgent:
		return "agent"
	case classList:
		return "list"
	}
	return "operator"
}

// listMethods are operators' calls whose cost grows with the state.
var listMethods = map[string]bool{
	droverv1.NodeService_List_FullMethodName:            true,
	droverv1.NodeService_Usage_FullMethodName:           true,
	droverv1.JobService_List_FullMethodName:             true,
	droverv1.JobService_Allocations_FullMethodName:      true,
	droverv1.JobService_Evaluations_FullMethodName:      true,
	droverv1.JobService_Versions_FullMethodName:         true,
	droverv1.JobService_Plan_FullMethodName:             true,
	droverv1.DeploymentService_List_FullMethodName:      true,
	droverv1.AllocService_List_FullMethodName:           true,
	droverv1.EvalService_List_FullMethodName:            true,
	droverv1.OperatorService_StateDigest_FullMethodName: true,
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
	if listMethods[method] {
		return classList
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
