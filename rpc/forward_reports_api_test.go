package rpc_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestForwardAllocReportsAnswersEachCall sends the leader a batch of
// agents' calls as a follower does and checks that each is answered, and
// applied or refused, as UpdateAlloc answers it alone.
func TestForwardAllocReportsAnswersEachCall(t *testing.T) {
	e := newEnv(t)
	cluster := droverv1.NewClusterServiceClient(e.srv.Conn)
	job := e.job(4)
	ready, down := e.register(), e.register()
	e.heartbeat(ready)
	onReady := e.place(ready, job, 3)
	onDown := e.place(down, job, 1)
	e.setStatus(down, droverv1.NodeStatus_NODE_STATUS_DOWN)

	running := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	call := func(n *droverv1.Node, secret, allocID string, deadline time.Time) *droverv1.ForwardedAllocReport {
		r := &droverv1.ForwardedAllocReport{Request: &droverv1.UpdateAllocRequest{NodeId: n.GetId(), SecretId: secret,
			Allocs: []*droverv1.AllocClientUpdate{{AllocId: allocID, ClientStatus: running}}}}
		if !deadline.IsZero() {
			r.Deadline = deadline.UnixNano()
		}
		return r
	}
	later := time.Now().Add(time.Minute)
	cases := []struct {
		name   string
		report *droverv1.ForwardedAllocReport
		code   codes.Code
		// applied is the allocation the call sets running, "" for none.
		applied string
		// untouched is an allocation the call must leave as it was.
		untouched string
	}{
		{"a report", call(ready, ready.GetSecretId(), onReady[0].GetId(), later), codes.OK, onReady[0].GetId(), ""},
		{"a report without a deadline", call(ready, ready.GetSecretId(), onReady[1].GetId(), time.Time{}), codes.OK, onReady[1].GetId(), ""},
		{"a wrong secret", call(ready, down.GetSecretId(), onReady[2].GetId(), later), codes.PermissionDenied, "", onReady[2].GetId()},
		{"a node that is down", call(down, down.GetSecretId(), onDown[0].GetId(), later), codes.FailedPrecondition, "", onDown[0].GetId()},
		{"a caller that gave up before the batch arrived", call(ready, ready.GetSecretId(), onReady[2].GetId(), time.Now().Add(-time.Second)), codes.DeadlineExceeded, "", onReady[2].GetId()},
		{"a malformed report", &droverv1.ForwardedAllocReport{Request: &droverv1.UpdateAllocRequest{NodeId: ready.GetId(), SecretId: ready.GetSecretId()}}, codes.InvalidArgument, "", ""},
	}
	req := &droverv1.ForwardAllocReportsRequest{}
	for _, tc := range cases {
		req.Reports = append(req.Reports, tc.report)
	}
	resp, err := cluster.ForwardAllocReports(e.ctx(), req)
	if err != nil {
		t.Fatalf("ForwardAllocReports: %v", err)
	}
	if len(resp.GetOutcomes()) != len(cases) {
		t.Fatalf("%d outcomes for %d calls", len(resp.GetOutcomes()), len(cases))
	}
	snap := e.srv.State().Snapshot()
	for i, tc := range cases {
		o := resp.GetOutcomes()[i]
		if codes.Code(o.GetCode()) != tc.code {
			t.Errorf("%s: %s %q, want %s", tc.name, codes.Code(o.GetCode()), o.GetMessage(), tc.code)
		}
		if tc.code == codes.OK && o.GetResponse().GetIndex() == 0 {
			t.Errorf("%s: answered without the entry's index", tc.name)
		}
		if tc.applied != "" && snap.AllocByID(tc.applied).GetClientStatus() != running {
			t.Errorf("%s: allocation %s not running", tc.name, tc.applied)
		}
		if tc.untouched != "" && snap.AllocByID(tc.untouched).GetClientStatus() == running {
			t.Errorf("%s: allocation %s set running", tc.name, tc.untouched)
		}
	}

	for name, bad := range map[string]*droverv1.ForwardAllocReportsRequest{
		"no calls":            {},
		"a call without body": {Reports: []*droverv1.ForwardedAllocReport{{}}},
	} {
		_, err := cluster.ForwardAllocReports(e.ctx(), bad)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
}
