package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/audit"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server"
)

// aclEnv is a real single server with ACLs on and an audit log.
type aclEnv struct {
	*env
	acl   droverv1.ACLServiceClient
	audit string
}

func newACLEnv(t *testing.T) *aclEnv {
	t.Helper()
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	e := newEnv(t, func(c *server.Config) { c.ACLEnabled, c.AuditLog = true, auditPath })
	return &aclEnv{env: e, acl: droverv1.NewACLServiceClient(e.srv.Conn), audit: auditPath}
}

// as makes a call carry secret as its token.
func as(ctx context.Context, secret string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, rpc.TokenMetadataKey, secret)
}

func (e *aclEnv) bootstrap() string {
	e.t.Helper()
	resp, err := e.acl.Bootstrap(e.ctx(), &droverv1.ACLBootstrapRequest{})
	if err != nil {
		e.t.Fatalf("bootstrap: %v", err)
	}
	if resp.GetToken().GetSecretHash() != nil {
		e.t.Error("the bootstrap answer carries the secret's hash")
	}
	return resp.GetSecretId()
}

// auditLines reads the audit log.
func (e *aclEnv) auditLines() []audit.Entry {
	e.t.Helper()
	f, err := os.Open(e.audit)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var en audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &en); err != nil {
			e.t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, en)
	}
	return out
}

// TestACLBootstrapReset: a second bootstrap is refused, naming the reset
// index; with that index in the reset file it succeeds once, and the old
// bootstrap token stops working.
func TestACLBootstrapReset(t *testing.T) {
	e := newACLEnv(t)
	first := e.bootstrap()
	_, err := e.acl.Bootstrap(e.ctx(), &droverv1.ACLBootstrapRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "reset index") {
		t.Fatalf("second bootstrap: %v, want FailedPrecondition naming the reset index", err)
	}
	resetFile := filepath.Join(e.srv.Config.DataDir, "acl-bootstrap-reset")
	if err := os.WriteFile(resetFile, []byte("12345\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.acl.Bootstrap(e.ctx(), &droverv1.ACLBootstrapRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("bootstrap with a wrong reset index: %v, want FailedPrecondition", err)
	}
	index := e.srv.State().Snapshot().ACLBootstrap().GetIndex()
	if err := os.WriteFile(resetFile, []byte(strconv.FormatUint(index, 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	second := e.bootstrap()
	if _, err := os.Stat(resetFile); !os.IsNotExist(err) {
		t.Errorf("the reset file is still there after the reset: %v", err)
	}
	if _, err := e.acl.Self(as(e.ctx(), first), &droverv1.ACLTokenSelfRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the old bootstrap token after a reset: %v, want Unauthenticated", err)
	}
	if _, err := e.acl.Self(as(e.ctx(), second), &droverv1.ACLTokenSelfRequest{}); err != nil {
		t.Errorf("the new bootstrap token: %v", err)
	}
}

// TestACLWrites covers the checks of the ACL service's writes.
func TestACLWrites(t *testing.T) {
	e := newACLEnv(t)
	mgmt := e.bootstrap()
	ctx := as(e.ctx(), mgmt)
	_, err := e.acl.ApplyPolicy(ctx, &droverv1.ApplyACLPolicyRequest{Policy: &droverv1.ACLPolicy{Name: "bad", Rules: "node {\n  policy = \"admin\"\n}"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "bad.hcl:2") {
		t.Errorf("a policy with a bad rule: %v, want InvalidArgument naming line 2", err)
	}
	if _, err := e.acl.ApplyPolicy(ctx, &droverv1.ApplyACLPolicyRequest{Policy: &droverv1.ACLPolicy{Name: "acl-writer", Rules: `acl { policy = "write" }`}}); err != nil {
		t.Fatal(err)
	}
	_, err = e.acl.CreateToken(ctx, &droverv1.CreateACLTokenRequest{Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT, Policies: []string{"missing"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a token naming a missing policy: %v, want InvalidArgument", err)
	}
	writer, err := e.acl.CreateToken(ctx, &droverv1.CreateACLTokenRequest{Name: "w", Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT, Policies: []string{"acl-writer"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.acl.CreateToken(as(e.ctx(), writer.GetSecretId()), &droverv1.CreateACLTokenRequest{Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("acl write creating a management token: %v, want PermissionDenied", err)
	}
	stored := e.srv.State().Snapshot().ACLToken(writer.GetToken().GetAccessorId())
	if string(stored.GetSecretHash()) == writer.GetSecretId() || len(stored.GetSecretHash()) != 32 {
		t.Errorf("the state holds %x for the token's secret, want its SHA-256", stored.GetSecretHash())
	}
	upd, err := e.acl.UpdateToken(ctx, &droverv1.UpdateACLTokenRequest{AccessorId: writer.GetToken().GetAccessorId(), Name: "renamed", Policies: []string{"acl-writer"}})
	if err != nil || upd.GetToken().GetName() != "renamed" {
		t.Fatalf("update token: %v, %v", upd, err)
	}
	if _, err := e.acl.Self(as(e.ctx(), writer.GetSecretId()), &droverv1.ACLTokenSelfRequest{}); err != nil {
		t.Errorf("the token after its update: %v (its secret must stay)", err)
	}
	short, err := e.acl.CreateToken(ctx, &droverv1.CreateACLTokenRequest{Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT, Ttl: durationpb.New(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	expiry := short.GetToken().GetExpirationTime().AsTime()
	for time.Now().Before(expiry) {
		time.Sleep(time.Until(expiry)) // the expiry is the event waited for
	}
	_, err = e.acl.Self(as(e.ctx(), short.GetSecretId()), &droverv1.ACLTokenSelfRequest{})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired token: %v, want Unauthenticated saying it expired", err)
	}
	if _, err := droverv1.NewOperatorServiceClient(e.srv.Conn).GarbageCollect(ctx, &droverv1.GarbageCollectRequest{}); err != nil {
		t.Fatal(err)
	}
	if e.srv.State().Snapshot().ACLToken(short.GetToken().GetAccessorId()) != nil {
		t.Error("garbage collection kept the expired token")
	}
}

// TestACLDisabledRefusesManagement: without -acl-enabled the ACL service
// says so rather than pretend to enforce policies, and calls need no
// token.
func TestACLDisabledRefusesManagement(t *testing.T) {
	e := newEnv(t)
	_, err := droverv1.NewACLServiceClient(e.srv.Conn).Bootstrap(e.ctx(), &droverv1.ACLBootstrapRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "-acl-enabled") {
		t.Errorf("bootstrap with ACLs off: %v, want FailedPrecondition naming -acl-enabled", err)
	}
	e.job(1)
}

// TestAuditLog: writes and refusals are recorded with who, what, the ids
// and the raft index; reads are not.
func TestAuditLog(t *testing.T) {
	e := newACLEnv(t)
	mgmt := e.bootstrap()
	j := mock.Job(1)
	resp, err := e.jobs.Register(as(e.ctx(), mgmt), &droverv1.RegisterJobRequest{Job: j})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.jobs.Deregister(e.ctx(), &droverv1.DeregisterJobRequest{JobId: j.GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("deregister without a token: %v", err)
	}
	if _, err := e.jobs.Get(as(e.ctx(), mgmt), &droverv1.GetJobRequest{JobId: j.GetId()}); err != nil {
		t.Fatal(err)
	}
	lines := e.auditLines()
	if len(lines) != 3 {
		t.Fatalf("audit lines %+v, want bootstrap, register and the refused deregister", lines)
	}
	self, err := e.acl.Self(as(e.ctx(), mgmt), &droverv1.ACLTokenSelfRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reg, refused := lines[1], lines[2]
	if reg.Method != droverv1.JobService_Register_FullMethodName || reg.Accessor != self.GetToken().GetAccessorId() ||
		reg.Code != "OK" || reg.Index != resp.GetIndex() || reg.IDs["job.id"] != j.GetId() || reg.Peer == "" {
		t.Errorf("register's audit line %+v, want accessor %s, index %d, job.id %s", reg, self.GetToken().GetAccessorId(), resp.GetIndex(), j.GetId())
	}
	if refused.Method != droverv1.JobService_Deregister_FullMethodName || refused.Accessor != "anonymous" ||
		refused.Code != "PermissionDenied" || refused.IDs["job_id"] != j.GetId() || refused.Message == "" {
		t.Errorf("the refused deregister's audit line %+v", refused)
	}
	// logrotate: rename, then SIGHUP, which reopens the file at its path.
	if err := os.Rename(e.audit, e.audit+".1"); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.ReopenAuditLog(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.jobs.Deregister(as(e.ctx(), mgmt), &droverv1.DeregisterJobRequest{JobId: j.GetId()}); err != nil {
		t.Fatal(err)
	}
	if after := e.auditLines(); len(after) != 1 || after[0].Method != droverv1.JobService_Deregister_FullMethodName {
		t.Errorf("audit lines after the reopen: %+v, want the deregister alone", after)
	}
}

// TestACLFilters: a token that reads only the web-* jobs sees only their
// allocations and evaluations, in lists, in a node's allocations and by id.
func TestACLFilters(t *testing.T) {
	e := newACLEnv(t)
	mgmt := as(e.ctx(), e.bootstrap())
	n := e.register()
	var web, db *droverv1.Job
	for _, id := range []string{"db-1", "web-1"} {
		j := mock.Job(1)
		j.Id = id
		if _, err := e.jobs.Register(mgmt, &droverv1.RegisterJobRequest{Job: j}); err != nil {
			t.Fatal(err)
		}
		stored := e.srv.State().Snapshot().JobByID(id)
		if id == "web-1" {
			web = stored
		} else {
			db = stored
		}
	}
	webAllocs, dbAllocs := e.place(n, web, 2), e.place(n, db, 2)
	if _, err := e.acl.ApplyPolicy(mgmt, &droverv1.ApplyACLPolicyRequest{Policy: &droverv1.ACLPolicy{Name: "web",
		Rules: "job \"web-*\" { policy = \"read\" }\nallocation \"web-*\" { policy = \"read\" }\nnode { policy = \"read\" }"}}); err != nil {
		t.Fatal(err)
	}
	tok, err := e.acl.CreateToken(mgmt, &droverv1.CreateACLTokenRequest{Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT, Policies: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := as(e.ctx(), tok.GetSecretId())
	onlyWeb := func(what string, allocs []*droverv1.Allocation) {
		t.Helper()
		if len(allocs) != len(webAllocs) {
			t.Errorf("%s: %d allocations, want the %d of web-1", what, len(allocs), len(webAllocs))
		}
		for _, a := range allocs {
			if a.GetJobId() != web.GetId() {
				t.Errorf("%s: allocation %s of job %s", what, a.GetId(), a.GetJobId())
			}
		}
	}
	node, err := e.nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: n.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	onlyWeb("NodeService.Get", node.GetAllocs())
	list, err := e.allocs.List(ctx, &droverv1.ListAllocationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	onlyWeb("AllocService.List", list.GetAllocations())
	if _, err := e.allocs.Get(ctx, &droverv1.GetAllocationRequest{AllocId: dbAllocs[0].GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("AllocService.Get of a db-1 allocation: %v, want PermissionDenied", err)
	}
	if _, err := e.allocs.Get(ctx, &droverv1.GetAllocationRequest{AllocId: webAllocs[0].GetId()}); err != nil {
		t.Errorf("AllocService.Get of a web-1 allocation: %v", err)
	}
	evals, err := e.evals.List(ctx, &droverv1.ListEvaluationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evals.GetEvaluations()) == 0 {
		t.Error("no evaluation of web-1 listed")
	}
	for _, ev := range evals.GetEvaluations() {
		if ev.GetJobId() != web.GetId() {
			t.Errorf("EvalService.List: evaluation of %s", ev.GetJobId())
		}
	}
	if _, err := e.jobs.Allocations(ctx, &droverv1.ListJobAllocationsRequest{JobId: db.GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("JobService.Allocations of db-1: %v, want PermissionDenied", err)
	}
	if _, err := e.jobs.Register(ctx, &droverv1.RegisterJobRequest{Job: web}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a read-only token registering web-1: %v, want PermissionDenied", err)
	}
	// Calls without a token get what the anonymous policy grants.
	if _, err := e.nodes.List(e.ctx(), &droverv1.ListNodesRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("listing nodes without a token and no anonymous policy: %v, want PermissionDenied", err)
	}
	if _, err := e.acl.ApplyPolicy(mgmt, &droverv1.ApplyACLPolicyRequest{Policy: &droverv1.ACLPolicy{Name: rpc.AnonymousPolicy,
		Rules: `node { policy = "read" }`}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.nodes.List(e.ctx(), &droverv1.ListNodesRequest{}); err != nil {
		t.Errorf("listing nodes without a token under an anonymous policy granting node read: %v", err)
	}
	if _, err := e.jobs.List(e.ctx(), &droverv1.ListJobsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("listing jobs without a token: %v, want PermissionDenied", err)
	}
}
