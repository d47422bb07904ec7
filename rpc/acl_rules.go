package rpc

import (
	"fmt"
	"slices"
	"strings"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/acl"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// callerKind is who may make a call, before any capability.
type callerKind int

const (
	// callerOperator calls need the capability of the rule: a token's, or
	// the anonymous policy's.
	callerOperator callerKind = iota
	// callerAnyone calls need nothing: health checks, reflection, the
	// server's own description and the ACL bootstrap (guarded by the FSM).
	callerAnyone
	// callerToken calls need a valid token, whatever it grants.
	callerToken
	// callerNode calls are the node API: held to the node's secret by the
	// handlers, never to a token.
	callerNode
	// callerServer calls are made by servers only: held to the server
	// certificate (authorizer), never to a token.
	callerServer
)

// rule is what one RPC needs. The table below is the only place access is
// decided: the interceptor applies it to every call, and a test fails when
// a method of any registered service has no rule.
type rule struct {
	caller   callerKind
	resource acl.Resource
	access   acl.Access
	// write marks a call that changes the state: it is audited.
	write bool
	// management calls need a management token, whatever the policies
	// grant.
	management bool
	// job names the job the call acts on, from the request or, for a
	// request naming an allocation, evaluation or deployment, from the
	// state. "" checks the resource as a whole (the call's answer is then
	// filtered, if filter is set).
	job func(snap *state.Snapshot, req any) string
	// filter drops from an answer what the ACL may not read, or refuses an
	// answer about one object the ACL may not read. It runs on the server
	// the caller called, whichever server answered.
	filter func(a *acl.ACL, resp any) error
}

// Rules of each kind, to keep the table readable.
func anyone() rule     { return rule{caller: callerAnyone} }
func serverCall() rule { return rule{caller: callerServer} }
func nodeCall() rule   { return rule{caller: callerNode} }
func nodeWrite() rule  { return rule{caller: callerNode, write: true} }
func management() rule {
	return rule{resource: acl.ResourceOperator, access: acl.AccessWrite, write: true, management: true}
}
func read(r acl.Resource) rule {
	return rule{resource: r, access: acl.AccessRead}
}
func write(r acl.Resource) rule {
	return rule{resource: r, access: acl.AccessWrite, write: true}
}

// on scopes a rule to the job named by job.
func (r rule) on(job func(*state.Snapshot, any) string) rule {
	r.job = job
	return r
}

// filtered filters a rule's answers.
func (r rule) filtered(f func(*acl.ACL, any) error) rule {
	r.filter = f
	return r
}

// accessRules maps every RPC of every service the server registers to what
// it needs.
var accessRules = map[string]rule{
	// Node API: agents, held to their node secrets.
	droverv1.NodeService_Register_FullMethodName:     nodeWrite(),
	droverv1.NodeService_UpdateStatus_FullMethodName: nodeWrite(),
	droverv1.NodeService_UpdateAlloc_FullMethodName:  nodeWrite(),
	droverv1.NodeService_GetAllocs_FullMethodName:    nodeCall(),
	// Nodes, for operators.
	droverv1.NodeService_Get_FullMethodName:               read(acl.ResourceNode).filtered(filterNodeAllocs),
	droverv1.NodeService_List_FullMethodName:              read(acl.ResourceNode),
	droverv1.NodeService_Usage_FullMethodName:             read(acl.ResourceNode),
	droverv1.NodeService_UpdateEligibility_FullMethodName: write(acl.ResourceNode),
	droverv1.NodeService_UpdateDrain_FullMethodName:       write(acl.ResourceNode),

	droverv1.JobService_Register_FullMethodName:    write(acl.ResourceJob).on(jobOfRequest),
	droverv1.JobService_Deregister_FullMethodName:  write(acl.ResourceJob).on(jobOfRequest),
	droverv1.JobService_Revert_FullMethodName:      write(acl.ResourceJob).on(jobOfRequest),
	droverv1.JobService_Plan_FullMethodName:        rule{resource: acl.ResourceJob, access: acl.AccessWrite, job: jobOfRequest},
	droverv1.JobService_Validate_FullMethodName:    read(acl.ResourceJob).on(jobOfRequest),
	droverv1.JobService_Get_FullMethodName:         read(acl.ResourceJob).on(jobOfRequest),
	droverv1.JobService_Versions_FullMethodName:    read(acl.ResourceJob).on(jobOfRequest),
	droverv1.JobService_List_FullMethodName:        read(acl.ResourceJob).filtered(filterJobs),
	droverv1.JobService_Allocations_FullMethodName: read(acl.ResourceAllocation).on(jobOfRequest),
	droverv1.JobService_Evaluations_FullMethodName: read(acl.ResourceAllocation).on(jobOfRequest),

	droverv1.DeploymentService_Get_FullMethodName:     read(acl.ResourceDeployment).filtered(checkDeployment),
	droverv1.DeploymentService_List_FullMethodName:    read(acl.ResourceDeployment).on(jobOfRequest).filtered(filterDeployments),
	droverv1.DeploymentService_Promote_FullMethodName: write(acl.ResourceDeployment).on(jobOfDeployment),
	droverv1.DeploymentService_Pause_FullMethodName:   write(acl.ResourceDeployment).on(jobOfDeployment),
	droverv1.DeploymentService_Fail_FullMethodName:    write(acl.ResourceDeployment).on(jobOfDeployment),

	droverv1.AllocService_Get_FullMethodName:  read(acl.ResourceAllocation).filtered(checkAlloc),
	droverv1.AllocService_List_FullMethodName: read(acl.ResourceAllocation).filtered(filterAllocs),
	droverv1.EvalService_Get_FullMethodName:   read(acl.ResourceAllocation).filtered(checkEval),
	droverv1.EvalService_List_FullMethodName:  read(acl.ResourceAllocation).filtered(filterEvals),

	// The stream's events are filtered as they are sent (filteredStream).
	droverv1.EventService_Stream_FullMethodName: read(acl.ResourceEvent),

	droverv1.ClusterService_Info_FullMethodName:                anyone(),
	droverv1.ClusterService_Join_FullMethodName:                serverCall(),
	droverv1.ClusterService_ReadIndex_FullMethodName:           serverCall(),
	droverv1.ClusterService_ForwardAllocReports_FullMethodName: serverCall(),

	droverv1.OperatorService_RaftListPeers_FullMethodName:          read(acl.ResourceOperator),
	droverv1.OperatorService_RaftRemovePeer_FullMethodName:         write(acl.ResourceOperator),
	droverv1.OperatorService_RaftTransferLeadership_FullMethodName: write(acl.ResourceOperator),
	droverv1.OperatorService_ServerMembers_FullMethodName:          read(acl.ResourceOperator),
	droverv1.OperatorService_StateDigest_FullMethodName:            read(acl.ResourceOperator),
	droverv1.OperatorService_SchedulerWorkers_FullMethodName:       read(acl.ResourceOperator),
	droverv1.OperatorService_UpdateSchedulerWorkers_FullMethodName: write(acl.ResourceOperator),
	droverv1.OperatorService_SchedulerStats_FullMethodName:         read(acl.ResourceOperator),
	droverv1.OperatorService_GarbageCollect_FullMethodName:         write(acl.ResourceOperator),
	// A backup holds everything, token hashes included.
	droverv1.OperatorService_SnapshotSave_FullMethodName: write(acl.ResourceOperator),
	// A restore rewinds everything, ACLs included.
	droverv1.OperatorService_SnapshotRestore_FullMethodName: management(),

	droverv1.SchedulerService_Dequeue_FullMethodName:     serverCall(),
	droverv1.SchedulerService_Ack_FullMethodName:         serverCall(),
	droverv1.SchedulerService_Nack_FullMethodName:        serverCall(),
	droverv1.SchedulerService_SubmitPlan_FullMethodName:  serverCall(),
	droverv1.SchedulerService_UpdateEval_FullMethodName:  serverCall(),
	droverv1.SchedulerService_CreateEval_FullMethodName:  serverCall(),
	droverv1.SchedulerService_ReblockEval_FullMethodName: serverCall(),

	droverv1.ACLService_Bootstrap_FullMethodName:    {caller: callerAnyone, write: true},
	droverv1.ACLService_ApplyPolicy_FullMethodName:  write(acl.ResourceACL),
	droverv1.ACLService_DeletePolicy_FullMethodName: write(acl.ResourceACL),
	droverv1.ACLService_GetPolicy_FullMethodName:    read(acl.ResourceACL),
	droverv1.ACLService_ListPolicies_FullMethodName: read(acl.ResourceACL),
	droverv1.ACLService_CreateToken_FullMethodName:  write(acl.ResourceACL),
	droverv1.ACLService_UpdateToken_FullMethodName:  write(acl.ResourceACL),
	droverv1.ACLService_DeleteToken_FullMethodName:  write(acl.ResourceACL),
	droverv1.ACLService_GetToken_FullMethodName:     read(acl.ResourceACL),
	droverv1.ACLService_ListTokens_FullMethodName:   read(acl.ResourceACL),
	droverv1.ACLService_Self_FullMethodName:         {caller: callerToken},

	healthpb.Health_Check_FullMethodName:                                   anyone(),
	healthpb.Health_List_FullMethodName:                                    anyone(),
	healthpb.Health_Watch_FullMethodName:                                   anyone(),
	reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName:      anyone(),
	reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName: anyone(),
}

// jobOfRequest is the job a request names in a job_id field or a job.
func jobOfRequest(_ *state.Snapshot, req any) string {
	switch r := req.(type) {
	case interface{ GetJobId() string }:
		return r.GetJobId()
	case interface{ GetJob() *droverv1.Job }:
		return r.GetJob().GetId()
	}
	return ""
}

func jobOfDeployment(snap *state.Snapshot, req any) string {
	if r, ok := req.(interface{ GetDeploymentId() string }); ok && droverv1.IsUUID(r.GetDeploymentId()) {
		return snap.DeploymentByID(r.GetDeploymentId()).GetJobId()
	}
	return ""
}

func checkDeployment(a *acl.ACL, resp any) error {
	d := resp.(*droverv1.GetDeploymentResponse).GetDeployment()
	return readable(a, acl.ResourceDeployment, d.GetJobId(), "deployment "+d.GetId())
}

func checkAlloc(a *acl.ACL, resp any) error {
	al := resp.(*droverv1.GetAllocationResponse).GetAllocation()
	return readable(a, acl.ResourceAllocation, al.GetJobId(), "allocation "+al.GetId())
}

func checkEval(a *acl.ACL, resp any) error {
	e := resp.(*droverv1.GetEvaluationResponse).GetEvaluation()
	return readable(a, acl.ResourceAllocation, e.GetJobId(), "evaluation "+e.GetId())
}

// readable refuses an answer about what, an object of job, that a may not
// read.
func readable(a *acl.ACL, r acl.Resource, job, what string) error {
	if a.AllowJob(r, job, acl.AccessRead) {
		return nil
	}
	return fmt.Errorf("%s belongs to job %q: the token may not read its %ss: %w", what, job, r, errPermissionDenied)
}

func filterJobs(a *acl.ACL, resp any) error {
	r := resp.(*droverv1.ListJobsResponse)
	r.Jobs = readableOf(a, acl.ResourceJob, r.Jobs, (*droverv1.Job).GetId)
	return nil
}

func filterDeployments(a *acl.ACL, resp any) error {
	r := resp.(*droverv1.ListDeploymentsResponse)
	r.Deployments = readableOf(a, acl.ResourceDeployment, r.Deployments, (*droverv1.Deployment).GetJobId)
	return nil
}

func filterAllocs(a *acl.ACL, resp any) error {
	r := resp.(*droverv1.ListAllocationsResponse)
	r.Allocations = readableOf(a, acl.ResourceAllocation, r.Allocations, (*droverv1.Allocation).GetJobId)
	return nil
}

// filterNodeAllocs keeps, of a node's allocations, those of jobs whose
// allocations the ACL may read.
func filterNodeAllocs(a *acl.ACL, resp any) error {
	r := resp.(*droverv1.GetNodeResponse)
	r.Allocs = readableOf(a, acl.ResourceAllocation, r.Allocs, (*droverv1.Allocation).GetJobId)
	return nil
}

func filterEvals(a *acl.ACL, resp any) error {
	r := resp.(*droverv1.ListEvaluationsResponse)
	r.Evaluations = readableOf(a, acl.ResourceAllocation, r.Evaluations, (*droverv1.Evaluation).GetJobId)
	return nil
}

// readableOf keeps the items whose job (jobOf) a may read resource r of.
func readableOf[T any](a *acl.ACL, r acl.Resource, items []T, jobOf func(T) string) []T {
	return keep(items, func(it T) bool { return a.AllowJob(r, jobOf(it), acl.AccessRead) })
}

// eventReadable reports whether a may read ev: the resource of its topic,
// for the job its object belongs to.
func eventReadable(a *acl.ACL, ev *droverv1.Event) bool {
	switch ev.GetTopic() {
	case droverv1.Topic_TOPIC_NODE:
		return a.Allow(acl.ResourceNode, acl.AccessRead)
	case droverv1.Topic_TOPIC_JOB:
		return a.AllowJob(acl.ResourceJob, ev.GetJob().GetId(), acl.AccessRead)
	case droverv1.Topic_TOPIC_ALLOCATION:
		return a.AllowJob(acl.ResourceAllocation, ev.GetAllocation().GetJobId(), acl.AccessRead)
	case droverv1.Topic_TOPIC_EVALUATION:
		return a.AllowJob(acl.ResourceAllocation, ev.GetEvaluation().GetJobId(), acl.AccessRead)
	case droverv1.Topic_TOPIC_DEPLOYMENT:
		return a.AllowJob(acl.ResourceDeployment, ev.GetDeployment().GetJobId(), acl.AccessRead)
	}
	return false
}

// keep returns the items for which ok holds, in a new slice: answers may
// share their slices with the state.
func keep[T any](items []T, ok func(T) bool) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		if ok(it) {
			out = append(out, it)
		}
	}
	return out
}

// MethodAccess is what an operator RPC needs of the caller's token.
type MethodAccess struct {
	// Method is the full gRPC method name.
	Method   string
	Resource acl.Resource
	Access   acl.Access
}

// OperatorMethods lists the RPCs that need an ACL capability, in method
// order: every RPC but the node API, the servers' own calls and the few
// open to anyone.
func OperatorMethods() []MethodAccess {
	var out []MethodAccess
	for m, r := range accessRules {
		if r.caller == callerOperator {
			out = append(out, MethodAccess{Method: m, Resource: r.resource, Access: r.access})
		}
	}
	slices.SortFunc(out, func(a, b MethodAccess) int { return strings.Compare(a.Method, b.Method) })
	return out
}
