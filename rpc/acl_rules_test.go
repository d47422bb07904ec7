package rpc

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// The services the server registers besides drover's own.
	_ "google.golang.org/grpc/health/grpc_health_v1"
	_ "google.golang.org/grpc/reflection/grpc_reflection_v1"
	_ "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	_ "github.com/droverhq/drover/proto/drover/v1"
)

// servedPackages are the proto packages whose services the server
// registers.
var servedPackages = []string{"drover.v1", "grpc.health.v1", "grpc.reflection.v1", "grpc.reflection.v1alpha"}

// allMethods lists the full gRPC method name of every RPC of every
// service in servedPackages.
func allMethods(t *testing.T) []string {
	t.Helper()
	var out []string
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		pkg := string(fd.Package())
		served := false
		for _, p := range servedPackages {
			served = served || pkg == p
		}
		if !served {
			return true
		}
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				out = append(out, fmt.Sprintf("/%s/%s", svc.FullName(), svc.Methods().Get(j).Name()))
			}
		}
		return true
	})
	return out
}

// TestAccessRulesCoverEveryMethod fails when an RPC has no access rule, so
// that a new RPC cannot slip past access control, and when a rule names no
// RPC.
func TestAccessRulesCoverEveryMethod(t *testing.T) {
	methods := allMethods(t)
	if len(methods) < 50 {
		t.Fatalf("found only %d methods: the registry walk is broken", len(methods))
	}
	known := map[string]bool{}
	for _, m := range methods {
		known[m] = true
		r, ok := accessRules[m]
		if !ok {
			t.Errorf("%s has no entry in accessRules", m)
			continue
		}
		if r.caller == callerOperator && (r.resource == "" || r.access == 0) {
			t.Errorf("%s: an operator rule without a resource or access", m)
		}
		if r.job != nil && !r.resource.Scoped() {
			t.Errorf("%s: a job scope on the unscoped resource %s", m, r.resource)
		}
		if strings.Contains(m, "/drover.v1.SchedulerService/") && r.caller != callerServer {
			t.Errorf("%s: the scheduler service is for servers only", m)
		}
	}
	for m := range accessRules {
		if !known[m] {
			t.Errorf("accessRules names %s, which no service has", m)
		}
	}
}
