package test_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server/httpapi"
	"github.com/droverhq/drover/test/cluster"
)

// ids are the objects the HTTP cases name.
type ids struct {
	job, node, otherNode, alloc, eval, deployment string
}

// jobCases are the HTTP calls of the job, node, allocation, evaluation,
// deployment and operator services: reads whose answers must equal
// gRPC's, writes whose codes must, and errors.
func jobCases(id ids) []apiCase {
	job := mock.Job(1)
	job.Id, job.Name = id.job, id.job
	newJob := func(name string) *droverv1.Job {
		j := mock.Job(1)
		j.Id, j.Name = name, name
		return j
	}
	page := &droverv1.PageOptions{Prefix: id.job[:2], PageSize: 1}
	return []apiCase{
		// Reads.
		{method: "GET", path: "/v1/jobs", req: &droverv1.ListJobsRequest{}, rpc: droverv1.JobService_List_FullMethodName, resp: &droverv1.ListJobsResponse{}, same: true},
		{method: "GET", path: "/v1/jobs?prefix=" + page.Prefix + "&per_page=1", req: &droverv1.ListJobsRequest{Page: page}, rpc: droverv1.JobService_List_FullMethodName, resp: &droverv1.ListJobsResponse{}, same: true},
		{method: "GET", path: "/v1/job/" + id.job, req: &droverv1.GetJobRequest{JobId: id.job}, rpc: droverv1.JobService_Get_FullMethodName, resp: &droverv1.GetJobResponse{}, same: true},
		{method: "GET", path: "/v1/job/" + id.job + "/allocations", req: &droverv1.ListJobAllocationsRequest{JobId: id.job}, rpc: droverv1.JobService_Allocations_FullMethodName, resp: &droverv1.ListJobAllocationsResponse{}, same: true},
		{method: "GET", path: "/v1/job/" + id.job + "/evaluations", req: &droverv1.ListJobEvaluationsRequest{JobId: id.job}, rpc: droverv1.JobService_Evaluations_FullMethodName, resp: &droverv1.ListJobEvaluationsResponse{}, same: true},
		{method: "GET", path: "/v1/job/" + id.job + "/versions", req: &droverv1.JobVersionsRequest{JobId: id.job}, rpc: droverv1.JobService_Versions_FullMethodName, resp: &droverv1.JobVersionsResponse{}, same: true},
		{method: "GET", path: "/v1/job/" + id.job + "/deployments", req: &droverv1.ListDeploymentsRequest{JobId: id.job}, rpc: droverv1.DeploymentService_List_FullMethodName, resp: &droverv1.ListDeploymentsResponse{}, same: true},
		{method: "POST", path: "/v1/job/" + id.job + "/plan", req: &droverv1.PlanJobRequest{Job: job}, rpc: droverv1.JobService_Plan_FullMethodName, resp: &droverv1.PlanJobResponse{}, same: true},
		{method: "POST", path: "/v1/validate/job", req: &droverv1.ValidateJobRequest{Job: job}, rpc: droverv1.JobService_Validate_FullMethodName, resp: &droverv1.ValidateJobResponse{}, same: true},
		{method: "GET", path: "/v1/nodes", req: &droverv1.ListNodesRequest{}, rpc: droverv1.NodeService_List_FullMethodName, resp: &droverv1.ListNodesResponse{}, same: true},
		{method: "GET", path: "/v1/nodes/usage", req: &droverv1.NodeUsageRequest{}, rpc: droverv1.NodeService_Usage_FullMethodName, resp: &droverv1.NodeUsageResponse{}, same: true},
		{method: "GET", path: "/v1/nodes/usage?per_page=1", req: &droverv1.NodeUsageRequest{Page: &droverv1.PageOptions{PageSize: 1}}, rpc: droverv1.NodeService_Usage_FullMethodName, resp: &droverv1.NodeUsageResponse{}, same: true},
		{method: "GET", path: "/v1/node/" + id.node, req: &droverv1.GetNodeRequest{NodeId: id.node}, rpc: droverv1.NodeService_Get_FullMethodName, resp: &droverv1.GetNodeResponse{}, same: true},
		{method: "GET", path: "/v1/allocations", req: &droverv1.ListAllocationsRequest{}, rpc: droverv1.AllocService_List_FullMethodName, resp: &droverv1.ListAllocationsResponse{}, same: true},
		{method: "GET", path: "/v1/allocation/" + id.alloc, req: &droverv1.GetAllocationRequest{AllocId: id.alloc}, rpc: droverv1.AllocService_Get_FullMethodName, resp: &droverv1.GetAllocationResponse{}, same: true},
		{method: "GET", path: "/v1/evaluations", req: &droverv1.ListEvaluationsRequest{}, rpc: droverv1.EvalService_List_FullMethodName, resp: &droverv1.ListEvaluationsResponse{}, same: true},
		{method: "GET", path: "/v1/evaluation/" + id.eval, req: &droverv1.GetEvaluationRequest{EvalId: id.eval}, rpc: droverv1.EvalService_Get_FullMethodName, resp: &droverv1.GetEvaluationResponse{}, same: true},
		{method: "GET", path: "/v1/deployments", req: &droverv1.ListDeploymentsRequest{}, rpc: droverv1.DeploymentService_List_FullMethodName, resp: &droverv1.ListDeploymentsResponse{}, same: true},
		{method: "GET", path: "/v1/deployment/" + id.deployment, req: &droverv1.GetDeploymentRequest{DeploymentId: id.deployment}, rpc: droverv1.DeploymentService_Get_FullMethodName, resp: &droverv1.GetDeploymentResponse{}, same: true},
		{method: "GET", path: "/v1/operator/raft/configuration", req: &droverv1.RaftListPeersRequest{}, rpc: droverv1.OperatorService_RaftListPeers_FullMethodName, resp: &droverv1.RaftListPeersResponse{}, same: true},
		{method: "GET", path: "/v1/operator/autopilot/health", req: &droverv1.ServerMembersRequest{}, rpc: droverv1.OperatorService_ServerMembers_FullMethodName, resp: &droverv1.ServerMembersResponse{}, same: true},
		{method: "GET", path: "/v1/operator/state-digest", req: &droverv1.StateDigestRequest{}, rpc: droverv1.OperatorService_StateDigest_FullMethodName, resp: &droverv1.StateDigestResponse{}, same: true},
		{method: "GET", path: "/v1/operator/scheduler/stats", req: &droverv1.SchedulerStatsRequest{}, rpc: droverv1.OperatorService_SchedulerStats_FullMethodName, resp: &droverv1.SchedulerStatsResponse{}, same: true},
		{method: "GET", path: "/v1/agent/schedulers", req: &droverv1.SchedulerWorkersRequest{}, rpc: droverv1.OperatorService_SchedulerWorkers_FullMethodName, resp: &droverv1.SchedulerWorkersResponse{}, same: true},
		{method: "POST", path: "/v1/agent/schedulers", req: &droverv1.UpdateSchedulerWorkersRequest{}, rpc: droverv1.OperatorService_UpdateSchedulerWorkers_FullMethodName, resp: &droverv1.SchedulerWorkersResponse{}, same: true},

		// Writes, each on an object of its own.
		{method: "PUT", path: "/v1/jobs", req: &droverv1.RegisterJobRequest{Job: newJob(id.job + "-put-http")}, grpcReq: &droverv1.RegisterJobRequest{Job: newJob(id.job + "-put-grpc")},
			rpc: droverv1.JobService_Register_FullMethodName, resp: &droverv1.RegisterJobResponse{}},
		{method: "POST", path: "/v1/jobs", req: &droverv1.RegisterJobRequest{Job: newJob(id.job + "-post-http")}, grpcReq: &droverv1.RegisterJobRequest{Job: newJob(id.job + "-post-grpc")},
			rpc: droverv1.JobService_Register_FullMethodName, resp: &droverv1.RegisterJobResponse{}},
		{method: "DELETE", path: "/v1/job/" + id.job + "-post-http", req: &droverv1.DeregisterJobRequest{JobId: id.job + "-post-http"}, grpcReq: &droverv1.DeregisterJobRequest{JobId: id.job + "-post-grpc"},
			rpc: droverv1.JobService_Deregister_FullMethodName, resp: &droverv1.DeregisterJobResponse{}},
		{method: "POST", path: "/v1/node/" + id.otherNode + "/eligibility", req: &droverv1.UpdateNodeEligibilityRequest{NodeId: id.otherNode, Eligibility: droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE},
			rpc: droverv1.NodeService_UpdateEligibility_FullMethodName, resp: &droverv1.UpdateNodeEligibilityResponse{}},
		{method: "POST", path: "/v1/node/" + id.otherNode + "/drain", req: &droverv1.UpdateNodeDrainRequest{NodeId: id.otherNode, Enable: true, Deadline: durationpb.New(time.Hour)},
			rpc: droverv1.NodeService_UpdateDrain_FullMethodName, resp: &droverv1.UpdateNodeDrainResponse{}},
		{method: "PUT", path: "/v1/system/gc", req: &droverv1.GarbageCollectRequest{}, rpc: droverv1.OperatorService_GarbageCollect_FullMethodName, resp: &droverv1.GarbageCollectResponse{}},
		{method: "POST", path: "/v1/system/gc", req: &droverv1.GarbageCollectRequest{}, rpc: droverv1.OperatorService_GarbageCollect_FullMethodName, resp: &droverv1.GarbageCollectResponse{}},

		// Errors.
		{method: "GET", path: "/v1/job/no-such-job", req: &droverv1.GetJobRequest{JobId: "no-such-job"}, rpc: droverv1.JobService_Get_FullMethodName, resp: &droverv1.GetJobResponse{}},
		{method: "PUT", path: "/v1/jobs", req: &droverv1.RegisterJobRequest{Job: &droverv1.Job{Id: "invalid"}}, rpc: droverv1.JobService_Register_FullMethodName, resp: &droverv1.RegisterJobResponse{}},
		{method: "POST", path: "/v1/job/" + id.job + "/revert", req: &droverv1.RevertJobRequest{JobId: id.job, Version: 999}, rpc: droverv1.JobService_Revert_FullMethodName, resp: &droverv1.RevertJobResponse{}},
		{method: "POST", path: "/v1/node/" + mock.ID() + "/eligibility", req: &droverv1.UpdateNodeEligibilityRequest{Eligibility: droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE},
			rpc: droverv1.NodeService_UpdateEligibility_FullMethodName, resp: &droverv1.UpdateNodeEligibilityResponse{}},
		{method: "POST", path: "/v1/deployment/" + mock.ID() + "/promote", req: &droverv1.PromoteDeploymentRequest{}, rpc: droverv1.DeploymentService_Promote_FullMethodName, resp: &droverv1.DeploymentWriteResponse{}},
		{method: "POST", path: "/v1/deployment/" + mock.ID() + "/pause", req: &droverv1.PauseDeploymentRequest{Pause: true}, rpc: droverv1.DeploymentService_Pause_FullMethodName, resp: &droverv1.DeploymentWriteResponse{}},
		{method: "POST", path: "/v1/deployment/" + mock.ID() + "/fail", req: &droverv1.FailDeploymentRequest{}, rpc: droverv1.DeploymentService_Fail_FullMethodName, resp: &droverv1.DeploymentWriteResponse{}},
		{method: "DELETE", path: "/v1/operator/raft/peer?id=no-such-server", req: &droverv1.RaftRemovePeerRequest{Id: "no-such-server"}, rpc: droverv1.OperatorService_RaftRemovePeer_FullMethodName, resp: &droverv1.RaftRemovePeerResponse{}},
		{method: "POST", path: "/v1/operator/raft/transfer-leadership", req: &droverv1.RaftTransferLeadershipRequest{Id: "no-such-server"}, rpc: droverv1.OperatorService_RaftTransferLeadership_FullMethodName, resp: &droverv1.RaftTransferLeadershipResponse{}},
	}
}

// fillPathIDs completes requests whose id only the path carries in the
// HTTP call (the error cases with made-up ids), so that the gRPC call
// names the same object.
func fillPathIDs(cases []apiCase) []apiCase {
	for i, c := range cases {
		parts := strings.Split(strings.SplitN(c.path, "?", 2)[0], "/")
		switch r := c.req.(type) {
		case *droverv1.UpdateNodeEligibilityRequest:
			r.NodeId = parts[3]
		case *droverv1.PromoteDeploymentRequest:
			r.DeploymentId = parts[3]
		case *droverv1.PauseDeploymentRequest:
			r.DeploymentId = parts[3]
		case *droverv1.FailDeploymentRequest:
			r.DeploymentId = parts[3]
		}
		cases[i] = c
	}
	return cases
}

// TestHTTPAPI runs a 3-server cluster with the HTTP API on and calls every
// path of it with a plain HTTP client, on the leader and on a follower
// (which forwards writes to the leader), against the same call over gRPC: the
// same answers and codes. It checks blocking queries that wake on a
// change, stale reads on a follower, the event stream as NDJSON, and that
// the OpenAPI document names no path left untested.
func TestHTTPAPI(t *testing.T) {
	c := cluster.New(t, droverBin, 3, httpArgs())
	ctx := within(t, testContext(t), 3*time.Minute)
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]

	nodes := readyNodes(ctx, t, leader.Conn(), 2)
	job := mock.Job(1)
	job.Id, job.Name = "web", "web"
	reg, err := registerJob(ctx, leader.Conn(), job, "")
	if err != nil {
		t.Fatal(err)
	}
	allocs := waitPlaced(ctx, t, leader, job.GetId(), 1)
	id := ids{job: job.GetId(), node: nodes[0].GetId(), otherNode: nodes[1].GetId(), alloc: allocs[0].GetId(), eval: reg.GetEvalId(), deployment: mock.ID()}
	if deps, err := droverv1.NewDeploymentServiceClient(leader.Conn()).List(ctx, &droverv1.ListDeploymentsRequest{}); err == nil && len(deps.GetDeployments()) > 0 {
		id.deployment = deps.GetDeployments()[0].GetId()
	}
	c.WaitConverged(ctx)

	cases := fillPathIDs(jobCases(id))
	for _, s := range []*cluster.Server{leader, follower} {
		if s.Info().HTTPAddr == "" {
			t.Fatalf("%s serves no HTTP", s)
		}
		checkSame(ctx, t, s, "", cases)
	}
	// The writes took effect.
	for _, j := range []string{"web-put-http", "web-post-http"} {
		if ok, err := jobKnown(ctx, leader, j); err != nil || !ok {
			t.Errorf("job %s registered over HTTP: known %v, %v", j, ok, err)
		}
	}
	n, err := droverv1.NewNodeServiceClient(leader.Conn()).Get(ctx, &droverv1.GetNodeRequest{NodeId: id.otherNode})
	if err != nil || n.GetNode().GetSchedulingEligibility() != droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE {
		t.Errorf("node %s after HTTP eligibility and drain: %v, %v", id.otherNode, n.GetNode().GetSchedulingEligibility(), err)
	}

	checkHTTPErrorCodes(ctx, t, leader)
	checkBlockingQuery(ctx, t, leader, follower)
	checkStaleRead(ctx, t, follower)
	checkEventStream(ctx, t, follower)
	// The ACL paths are called by TestHTTPACL, the stream by
	// checkEventStream.
	stream := apiCase{method: "GET", path: "/v1/event/stream"}
	checkOpenAPI(ctx, t, leader, cases, aclCases(ids{job: "web"}, "p", "a"), []apiCase{stream})
}

// checkHTTPErrorCodes checks the HTTP statuses the issue names.
func checkHTTPErrorCodes(ctx context.Context, t *testing.T, s *cluster.Server) {
	t.Helper()
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               codes.Code
	}{
		{"GET", "/v1/job/no-such-job", "", 404, codes.NotFound},
		{"PUT", "/v1/jobs", `{"job":{"id":"x"}}`, 400, codes.InvalidArgument},
		{"PUT", "/v1/jobs", `{"job":{"idd":"x"}}`, 400, codes.InvalidArgument},
		{"GET", "/v1/jobs?wait=soon", "", 400, codes.InvalidArgument},
		{"GET", "/v1/no-such-path", "", 404, codes.NotFound},
		{"PATCH", "/v1/jobs", "", 405, codes.Unimplemented},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		a, err := callHTTP(ctx, s.Info().HTTPAddr, tc.method, tc.path, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		var e httpapi.ErrorBody
		if err := json.Unmarshal(a.body, &e); err != nil || a.status != tc.status || codes.Code(e.Code) != tc.code {
			t.Errorf("%s %s: %d %s (%v), want %d %s", tc.method, tc.path, a.status, a.body, err, tc.status, tc.code)
		}
	}
}

// indexOf reads X-Drover-Index.
func indexOf(t *testing.T, a httpAnswer) uint64 {
	t.Helper()
	idx, err := strconv.ParseUint(a.header.Get(httpapi.IndexHeader), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", httpapi.IndexHeader, a.header.Get(httpapi.IndexHeader), err)
	}
	return idx
}

// checkBlockingQuery starts GET /v1/jobs?index=N&wait=30s on the
// follower, waits until the follower counts it among its blocking queries
// (it holds a consistent one itself once it has the leader's read index),
// registers a job, and expects the query to return with the job and an
// index past N well before its wait.
func checkBlockingQuery(ctx context.Context, t *testing.T, leader, follower *cluster.Server) {
	t.Helper()
	addr := follower.Info().HTTPAddr
	first, err := callHTTP(ctx, addr, "GET", "/v1/jobs", nil, nil)
	if err != nil || first.status != http.StatusOK {
		t.Fatalf("GET /v1/jobs: %v %d", err, first.status)
	}
	n := indexOf(t, first)
	type result struct {
		a   httpAnswer
		err error
		in  time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		a, err := callHTTP(ctx, addr, "GET", fmt.Sprintf("/v1/jobs?index=%d&wait=30s", n), nil, nil)
		done <- result{a, err, time.Since(start)}
	}()
	// The follower holds the query itself, once its state has the leader's
	// read index.
	poll(ctx, t, "the HTTP blocking query waiting on the follower", func() (bool, string) {
		m, err := callHTTP(ctx, addr, "GET", "/metrics", nil, nil)
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(string(m.body), "\n") {
			if v, ok := strings.CutPrefix(line, "drover_blocking_queries "); ok {
				return v != "0", line
			}
		}
		return false, "no drover_blocking_queries in /metrics"
	})
	select {
	case r := <-done:
		t.Fatalf("blocking query returned before any change: %d %s", r.a.status, r.a.body)
	default:
	}
	woke := mock.Job(1)
	woke.Id, woke.Name = "wakes-the-query", "wakes-the-query"
	if _, err := registerJob(ctx, leader.Conn(), woke, ""); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.a.status != http.StatusOK {
		t.Fatalf("blocking query: %v %d %s", r.err, r.a.status, r.a.body)
	}
	if got := indexOf(t, r.a); got <= n {
		t.Errorf("blocking query returned index %d, want more than %d", got, n)
	}
	if r.in >= 30*time.Second || !strings.Contains(string(r.a.body), woke.GetId()) {
		t.Errorf("blocking query returned after %s without the new job: %s", r.in, r.a.body)
	}
}

// checkStaleRead reads with ?stale on a follower: it answers from its own
// state and says how far behind it may be.
func checkStaleRead(ctx context.Context, t *testing.T, follower *cluster.Server) {
	t.Helper()
	a, err := callHTTP(ctx, follower.Info().HTTPAddr, "GET", "/v1/jobs?stale", nil, nil)
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("GET /v1/jobs?stale: %v %d %s", err, a.status, a.body)
	}
	if a.header.Get(httpapi.KnownLeaderHeader) != "true" || a.header.Get(httpapi.LastContactHeader) == "" || indexOf(t, a) == 0 {
		t.Errorf("stale read headers: %v", a.header)
	}
	var resp droverv1.ListJobsResponse
	if err := protojson.Unmarshal(a.body, &resp); err != nil || len(resp.GetJobs()) == 0 {
		t.Errorf("stale read: %v, %d jobs", err, len(resp.GetJobs()))
	}
}

// checkEventStream reads the event stream as newline-delimited JSON until
// it sees a job registered after the stream began.
func checkEventStream(ctx context.Context, t *testing.T, s *cluster.Server) {
	t.Helper()
	// The stream starts after the index of now and so holds the job
	// registered below, however the two race: the answer's headers only
	// come with its first batch.
	now, err := callHTTP(ctx, s.Info().HTTPAddr, "GET", "/v1/jobs", nil, nil)
	if err != nil || now.status != http.StatusOK {
		t.Fatalf("GET /v1/jobs: %v %d", err, now.status)
	}
	job := mock.Job(1)
	job.Id, job.Name = "streamed", "streamed"
	registered := make(chan error, 1)
	go func() {
		_, err := registerJob(ctx, s.Conn(), job, "")
		registered <- err
	}()
	streamCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/v1/event/stream?topics=TOPIC_JOB&index=%d", s.Info().HTTPAddr, indexOf(t, now))
	req, err := http.NewRequestWithContext(streamCtx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %d", resp.StatusCode)
	}
	if err := <-registered; err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 16<<20)
	for read := 0; lines.Scan(); read++ {
		var chunk struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(lines.Bytes(), &chunk); err != nil || chunk.Error != nil {
			t.Fatalf("event stream line %d %q: %v", read, lines.Bytes(), err)
		}
		var batch droverv1.StreamEventsResponse
		if err := protojson.Unmarshal(chunk.Result, &batch); err != nil {
			t.Fatalf("event stream line %d: %v", read, err)
		}
		for _, ev := range batch.GetEvents() {
			if ev.GetTopic() != droverv1.Topic_TOPIC_JOB {
				t.Errorf("event of topic %s on a TOPIC_JOB stream", ev.GetTopic())
			}
			if ev.GetJob().GetId() == job.GetId() {
				return
			}
		}
	}
	t.Fatalf("event stream ended without the job: %v", lines.Err())
}

// aclCases are the HTTP calls of the ACL service, on policy and token
// accessor.
func aclCases(_ ids, policy, accessor string) []apiCase {
	unknown := mock.ID()
	return []apiCase{
		{method: "GET", path: "/v1/acl/policies", req: &droverv1.ListACLPoliciesRequest{}, rpc: droverv1.ACLService_ListPolicies_FullMethodName, resp: &droverv1.ListACLPoliciesResponse{}, same: true},
		{method: "GET", path: "/v1/acl/policy/" + policy, req: &droverv1.GetACLPolicyRequest{Name: policy}, rpc: droverv1.ACLService_GetPolicy_FullMethodName, resp: &droverv1.GetACLPolicyResponse{}, same: true},
		{method: "GET", path: "/v1/acl/tokens", req: &droverv1.ListACLTokensRequest{}, rpc: droverv1.ACLService_ListTokens_FullMethodName, resp: &droverv1.ListACLTokensResponse{}, same: true},
		{method: "GET", path: "/v1/acl/token/" + accessor, req: &droverv1.GetACLTokenRequest{AccessorId: accessor}, rpc: droverv1.ACLService_GetToken_FullMethodName, resp: &droverv1.ACLTokenResponse{}, same: true},
		{method: "GET", path: "/v1/acl/token/self", req: &droverv1.ACLTokenSelfRequest{}, rpc: droverv1.ACLService_Self_FullMethodName, resp: &droverv1.ACLTokenResponse{}, same: true},
		{method: "POST", path: "/v1/acl/bootstrap", req: &droverv1.ACLBootstrapRequest{}, rpc: droverv1.ACLService_Bootstrap_FullMethodName, resp: &droverv1.ACLTokenSecretResponse{}},
		{method: "POST", path: "/v1/acl/policy/" + policy, req: &droverv1.ApplyACLPolicyRequest{Policy: &droverv1.ACLPolicy{Name: policy, Rules: `job "web-*" { policy = "read" }`}},
			rpc: droverv1.ACLService_ApplyPolicy_FullMethodName, resp: &droverv1.ACLWriteResponse{}},
		{method: "PUT", path: "/v1/acl/policy/" + policy, req: &droverv1.ApplyACLPolicyRequest{Policy: &droverv1.ACLPolicy{Name: policy, Rules: `job "web-*" { policy = "read" }`}},
			rpc: droverv1.ACLService_ApplyPolicy_FullMethodName, resp: &droverv1.ACLWriteResponse{}},
		{method: "POST", path: "/v1/acl/token/" + accessor, req: &droverv1.UpdateACLTokenRequest{AccessorId: accessor, Name: "renamed", Policies: []string{policy}},
			rpc: droverv1.ACLService_UpdateToken_FullMethodName, resp: &droverv1.ACLTokenResponse{}},
		{method: "POST", path: "/v1/acl/token", req: &droverv1.CreateACLTokenRequest{Name: "made", Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT, Policies: []string{policy}},
			rpc: droverv1.ACLService_CreateToken_FullMethodName, resp: &droverv1.ACLTokenSecretResponse{}},
		{method: "DELETE", path: "/v1/acl/token/" + unknown, req: &droverv1.DeleteACLTokenRequest{AccessorId: unknown}, rpc: droverv1.ACLService_DeleteToken_FullMethodName, resp: &droverv1.ACLWriteResponse{}},
		{method: "DELETE", path: "/v1/acl/policy/no-such-policy", req: &droverv1.DeleteACLPolicyRequest{Name: "no-such-policy"}, rpc: droverv1.ACLService_DeletePolicy_FullMethodName, resp: &droverv1.ACLWriteResponse{}},
	}
}

// TestHTTPACL runs a TLS server with ACLs on and the HTTP API: ACLs are
// bootstrapped and managed over HTTP; every path refuses, with gRPC's
// code, a call without a token, with an unknown token and with a token
// without the capability, and lets the management token in; lists are
// filtered as over gRPC; Authorization: Bearer works; and a forged
// drover-as-server header, or no token at all, never lets an HTTP caller
// act as the server, whose certificate the HTTP API does not carry.
func TestHTTPACL(t *testing.T) {
	c := cluster.New(t, droverBin, 1, cluster.Bootstrap(), cluster.TLS(), cluster.ACL(), httpArgs())
	ctx := within(t, testContext(t), 3*time.Minute)
	s := c.WaitLeader(ctx)
	addr := s.Info().HTTPAddr
	poll(ctx, t, "the server announced", func() (bool, string) {
		info, err := serverInfo(ctx, s)
		return err == nil && info.GetClusterId() != "", fmt.Sprint(err)
	})

	// Bootstrap over HTTP; a second bootstrap fails as over gRPC.
	a, err := callHTTP(ctx, addr, "POST", "/v1/acl/bootstrap", []byte(`{}`), nil)
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("bootstrap: %v %d %s", err, a.status, a.body)
	}
	var boot droverv1.ACLTokenSecretResponse
	if err := protojson.Unmarshal(a.body, &boot); err != nil || boot.GetSecretId() == "" {
		t.Fatalf("bootstrap answer %s: %v", a.body, err)
	}
	mgmt := boot.GetSecretId()
	c.SetToken(mgmt)

	// Policies and tokens made over HTTP.
	policy, reader := "http-reader", ""
	for _, step := range []struct{ path, body string }{
		{"/v1/acl/policy/" + policy, `{"policy":{"name":"http-reader","rules":"job \"web-*\" { policy = \"read\" }"}}`},
		{"/v1/acl/token", `{"name":"reader","type":"ACL_TOKEN_TYPE_CLIENT","policies":["http-reader"]}`},
	} {
		a, err := callHTTP(ctx, addr, "POST", step.path, []byte(step.body), tokenHeader(mgmt))
		if err != nil || a.status != http.StatusOK {
			t.Fatalf("POST %s: %v %d %s", step.path, err, a.status, a.body)
		}
		var tok droverv1.ACLTokenSecretResponse
		if strings.HasSuffix(step.path, "/token") {
			if err := protojson.Unmarshal(a.body, &tok); err != nil {
				t.Fatal(err)
			}
			reader = tok.GetSecretId()
		}
	}
	readerToken, err := droverv1.NewACLServiceClient(s.Conn()).Self(as(ctx, reader), &droverv1.ACLTokenSelfRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []string{"web-filtered", "db-filtered"} {
		job := mock.Job(1)
		job.Id, job.Name = j, j
		if _, err := registerJob(ctx, s.Conn(), job, ""); err != nil {
			t.Fatal(err)
		}
	}
	nodes := readyNodes(ctx, t, s.Conn(), 2)
	id := ids{job: "web-filtered", node: nodes[0].GetId(), otherNode: nodes[1].GetId(), alloc: mock.ID(), eval: mock.ID(), deployment: mock.ID()}
	jc := fillPathIDs(jobCases(id))
	ac := aclCases(id, policy, readerToken.GetToken().GetAccessorId())

	// The management token: the same answers as gRPC.
	checkSame(ctx, t, s, mgmt, ac)
	checkSame(ctx, t, s, mgmt, reads(jc))

	// Refusals: the same code as gRPC on every path, and the expected
	// code.
	all := append(append([]apiCase{}, jc...), ac...)
	for _, ref := range []struct {
		name, secret string
		want         codes.Code
	}{
		{"no token", "", codes.PermissionDenied},
		{"unknown token", mock.ID(), codes.Unauthenticated},
	} {
		for path, code := range checkCodes(ctx, t, s, ref.secret, all) {
			want := ref.want
			switch {
			case path == "POST /v1/acl/bootstrap":
				want = codes.FailedPrecondition // open to all, done once
			case path == "GET /v1/acl/token/self":
				want = codes.Unauthenticated // needs a token
			}
			if code != want {
				t.Errorf("%s with %s: %s, want %s", path, ref.name, code, want)
			}
		}
	}
	// The reader may read web-* jobs and nothing else.
	got := checkCodes(ctx, t, s, reader, all)
	for path, code := range got {
		readable := path == "GET /v1/jobs" || strings.HasPrefix(path, "GET /v1/jobs?") || path == "GET /v1/job/web-filtered" ||
			strings.HasPrefix(path, "GET /v1/job/web-filtered/") || path == "POST /v1/validate/job" || path == "GET /v1/acl/token/self"
		if !readable && code != codes.PermissionDenied && path != "POST /v1/acl/bootstrap" {
			t.Errorf("%s with the reader's token: %s, want PermissionDenied", path, code)
		}
	}
	// Lists are filtered as over gRPC.
	checkSame(ctx, t, s, reader, jc[:1])
	a, err = callHTTP(ctx, addr, "GET", "/v1/jobs", nil, tokenHeader(reader))
	if err != nil || a.status != http.StatusOK || strings.Contains(string(a.body), "db-filtered") || !strings.Contains(string(a.body), "web-filtered") {
		t.Errorf("jobs listed for the reader: %v %d %s", err, a.status, a.body)
	}

	// Authorization: Bearer.
	a, err = callHTTP(ctx, addr, "GET", "/v1/acl/token/self", nil, http.Header{"Authorization": {"Bearer " + reader}})
	if err != nil || a.status != http.StatusOK || !strings.Contains(string(a.body), readerToken.GetToken().GetAccessorId()) {
		t.Errorf("self with a bearer token: %v %d %s", err, a.status, a.body)
	}

	// No token, even with the header servers use among themselves, is
	// anonymous: the HTTP API never acts with the server's certificate.
	for _, h := range []http.Header{nil, {"Drover-As-Server": {"1"}}, {"Grpc-Metadata-Drover-As-Server": {"1"}}} {
		a, err := callHTTP(ctx, addr, "GET", "/v1/operator/raft/configuration", nil, h)
		if err != nil || a.status != http.StatusForbidden {
			t.Errorf("raft configuration with no token and headers %v: %v %d %s", h, err, a.status, a.body)
		}
	}
	var peers droverv1.RaftListPeersResponse
	a, err = callHTTP(ctx, addr, "GET", "/v1/operator/raft/configuration", nil, tokenHeader(mgmt))
	if err != nil || a.status != http.StatusOK || protojson.Unmarshal(a.body, &peers) != nil || len(peers.GetPeers()) != 1 {
		t.Errorf("raft configuration with the management token: %v %d %s", err, a.status, a.body)
	}
}

// reads are the cases whose answers are compared.
func reads(cases []apiCase) []apiCase {
	var out []apiCase
	for _, c := range cases {
		if c.same {
			out = append(out, c)
		}
	}
	return out
}
