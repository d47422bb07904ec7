package rpc

import (
	"errors"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestHaltGuard(t *testing.T) {
	reason := errors.New("stopped applying the raft log at index 7")
	halted := haltGuard{halted: func() error { return reason }}
	running := haltGuard{halted: func() error { return nil }}
	for _, tc := range []struct {
		method  string
		refused bool
	}{
		{"/" + droverv1.NodeService_ServiceDesc.ServiceName + "/GetAllocs", true},
		{"/" + droverv1.JobService_ServiceDesc.ServiceName + "/Register", true},
		{"/" + droverv1.EventService_ServiceDesc.ServiceName + "/Stream", true},
		{"/" + droverv1.SchedulerService_ServiceDesc.ServiceName + "/Dequeue", true},
		{"/" + droverv1.ClusterService_ServiceDesc.ServiceName + "/Info", false},
		{"/" + droverv1.OperatorService_ServiceDesc.ServiceName + "/StateDigest", false},
		{"/grpc.health.v1.Health/Check", false},
	} {
		err := halted.check(tc.method)
		if tc.refused != (err != nil) || tc.refused && (!errors.Is(err, ErrFailedPrecondition) || !errors.Is(err, reason)) {
			t.Errorf("%s on a halted server: %v, want refused %v with FAILED_PRECONDITION and the reason", tc.method, err, tc.refused)
		}
		if err := running.check(tc.method); err != nil {
			t.Errorf("%s on a running server: %v", tc.method, err)
		}
	}
	if err := (haltGuard{}).check("/" + droverv1.NodeService_ServiceDesc.ServiceName + "/GetAllocs"); err != nil {
		t.Errorf("no halt function: %v", err)
	}
}
