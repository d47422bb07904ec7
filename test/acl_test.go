package test_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/acl"
	"github.com/droverhq/drover/internal/acltest"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/test/cluster"
)

// as makes the calls of ctx carry secret as their token ("" for none),
// instead of the harness's management token.
func as(ctx context.Context, secret string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, rpc.TokenMetadataKey, secret)
}

// refusal is a credential that must be refused, and how.
type refusal struct {
	name   string
	secret func(r acl.Resource) string
	code   codes.Code
}

// TestACLCluster runs a 3-server TLS cluster with ACLs on. Two bootstraps
// racing on two servers make one token. Then every operator RPC is called,
// through a follower and through the leader, with no token, a token
// without the capability, a token whose policies deny it, an expired token
// and a deleted one: each is refused with its code and the state does not
// change; the management token is let in. A deleted token is refused by
// every server as soon as it has applied the deletion, and lists and the
// event stream hold only what the token may read.
func TestACLCluster(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.TLS(), cluster.ACL())
	ctx := within(t, testContext(t), 3*time.Minute)
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	// ACL entries are written once every server has announced its
	// release, as the cluster id is.
	poll(ctx, t, "every server announced", func() (bool, string) {
		info, err := serverInfo(ctx, leader)
		return err == nil && info.GetClusterId() != "", fmt.Sprint(err)
	})

	mgmt := raceBootstrap(ctx, t, leader, follower)
	c.SetToken(mgmt)
	admin := droverv1.NewACLServiceClient(leader.Conn())

	// A token without each resource's capability, and one whose
	// policies grant everything but deny it.
	allWrite := applyPolicy(ctx, t, admin, "all-write", rulesExcept(""))
	lacking, denying := map[acl.Resource]string{}, map[acl.Resource]string{}
	for _, r := range acl.Resources() {
		lacking[r] = createToken(ctx, t, admin, clientToken(applyPolicy(ctx, t, admin, "all-but-"+string(r), rulesExcept(r))))
		deny := applyPolicy(ctx, t, admin, "deny-"+string(r), denyRule(r))
		denying[r] = createToken(ctx, t, admin, clientToken(allWrite, deny))
	}
	deleted := createToken(ctx, t, admin, &droverv1.CreateACLTokenRequest{Name: "deleted", Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT})
	deleteToken(ctx, t, c, admin, deleted)
	expired := createToken(ctx, t, admin, &droverv1.CreateACLTokenRequest{Name: "expired",
		Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT, Ttl: durationpb.New(2 * time.Second)})
	poll(ctx, t, "the short-lived token to expire", func() (bool, string) {
		_, err := droverv1.NewACLServiceClient(leader.Conn()).Self(as(ctx, expired), &droverv1.ACLTokenSelfRequest{})
		return status.Code(err) == codes.Unauthenticated, fmt.Sprint(err)
	})
	c.WaitConverged(ctx)

	refusals := []refusal{
		{"no token", func(acl.Resource) string { return "" }, codes.PermissionDenied},
		{"token without the capability", func(r acl.Resource) string { return lacking[r] }, codes.PermissionDenied},
		{"deny rule", func(r acl.Resource) string { return denying[r] }, codes.PermissionDenied},
		{"expired token", func(acl.Resource) string { return expired }, codes.Unauthenticated},
		{"deleted token", func(acl.Resource) string { return deleted }, codes.Unauthenticated},
	}
	before := dataDigests(ctx, t, leader)
	methods := rpc.OperatorMethods()
	for _, s := range []*cluster.Server{follower, leader} {
		for _, m := range methods {
			for _, ref := range refusals {
				err := acltest.Invoke(as(ctx, ref.secret(m.Resource)), s.Conn(), m.Method)
				if status.Code(err) != ref.code {
					t.Errorf("%s on %s with %s: %v, want %s", m.Method, s, ref.name, err, ref.code)
				}
			}
		}
	}
	if after := dataDigests(ctx, t, leader); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused calls changed the state:\nbefore %v\nafter  %v", before, after)
	}
	for _, s := range []*cluster.Server{follower, leader} {
		for _, m := range methods {
			if m.Method == droverv1.OperatorService_RaftTransferLeadership_FullMethodName {
				continue // called last, below: it moves the leadership
			}
			callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := acltest.Invoke(as(callCtx, mgmt), s.Conn(), m.Method)
			cancel()
			if code := status.Code(err); code == codes.PermissionDenied || code == codes.Unauthenticated {
				t.Errorf("%s on %s with the management token: %v", m.Method, s, err)
			}
		}
	}

	checkFiltered(ctx, t, admin, leader, follower)
	checkServerActsForCluster(ctx, t, c, leader, follower)
	if _, err := droverv1.NewOperatorServiceClient(follower.Conn()).RaftTransferLeadership(ctx, &droverv1.RaftTransferLeadershipRequest{}); err != nil {
		t.Errorf("RaftTransferLeadership with the management token: %v", err)
	}
}

// raceBootstrap bootstraps ACLs on two servers at once: exactly one gets a
// token, the other FAILED_PRECONDITION. It returns the token's secret.
func raceBootstrap(ctx context.Context, t *testing.T, servers ...*cluster.Server) string {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		secrets []string
		refused []error
	)
	for _, s := range servers {
		wg.Go(func() {
			resp, err := droverv1.NewACLServiceClient(s.Conn()).Bootstrap(ctx, &droverv1.ACLBootstrapRequest{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, err)
				return
			}
			secrets = append(secrets, resp.GetSecretId())
		})
	}
	wg.Wait()
	if len(secrets) != 1 || len(refused) != len(servers)-1 {
		t.Fatalf("racing bootstraps: %d tokens, refusals %v; want exactly one token", len(secrets), refused)
	}
	for _, err := range refused {
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("the losing bootstrap: %v, want FailedPrecondition", err)
		}
	}
	list, err := droverv1.NewACLServiceClient(servers[0].Conn()).ListTokens(as(ctx, secrets[0]), &droverv1.ListACLTokensRequest{})
	if err != nil || len(list.GetTokens()) != 1 {
		t.Fatalf("tokens after the race: %v, %v; want one", list.GetTokens(), err)
	}
	return secrets[0]
}

// rulesExcept grants write on every resource but skip ("" skips none).
func rulesExcept(skip acl.Resource) string {
	rules := ""
	for _, r := range acl.Resources() {
		if r == skip {
			continue
		}
		if r.Scoped() {
			rules += fmt.Sprintf("%s \"*\" { policy = \"write\" }\n", r)
		} else {
			rules += fmt.Sprintf("%s { policy = \"write\" }\n", r)
		}
	}
	return rules
}

// denyRule denies every job's, or the whole, resource r.
func denyRule(r acl.Resource) string {
	if r.Scoped() {
		return fmt.Sprintf("%s \"*\" { policy = \"deny\" }\n", r)
	}
	return fmt.Sprintf("%s { policy = \"deny\" }\n", r)
}

func applyPolicy(ctx context.Context, t *testing.T, c droverv1.ACLServiceClient, name, rules string) string {
	t.Helper()
	if _, err := c.ApplyPolicy(ctx, &droverv1.ApplyACLPolicyRequest{Policy: &droverv1.ACLPolicy{Name: name, Rules: rules}}); err != nil {
		t.Fatalf("apply policy %s: %v", name, err)
	}
	return name
}

func clientToken(policies ...string) *droverv1.CreateACLTokenRequest {
	return &droverv1.CreateACLTokenRequest{Name: policies[len(policies)-1], Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT, Policies: policies}
}

func createToken(ctx context.Context, t *testing.T, c droverv1.ACLServiceClient, req *droverv1.CreateACLTokenRequest) string {
	t.Helper()
	resp, err := c.CreateToken(ctx, req)
	if err != nil {
		t.Fatalf("create token %s: %v", req.GetName(), err)
	}
	return resp.GetSecretId()
}

// deleteToken checks that every server honours the token, deletes it, and
// checks that every server refuses it as soon as it has applied the
// deletion: no cache serves it longer.
func deleteToken(ctx context.Context, t *testing.T, c *cluster.Cluster, admin droverv1.ACLServiceClient, secret string) {
	t.Helper()
	var accessor string
	for _, s := range c.Servers() {
		// A server honours a token once it has applied its creation.
		poll(ctx, t, "the new token honoured by "+s.String(), func() (bool, string) {
			self, err := droverv1.NewACLServiceClient(s.Conn()).Self(as(ctx, secret), &droverv1.ACLTokenSelfRequest{})
			accessor = self.GetToken().GetAccessorId()
			return err == nil, fmt.Sprint(err)
		})
	}
	del, err := admin.DeleteToken(ctx, &droverv1.DeleteACLTokenRequest{AccessorId: accessor})
	if err != nil {
		t.Fatalf("delete token %s: %v", accessor, err)
	}
	waitApplied(ctx, t, del.GetIndex(), c.Servers()...)
	for _, s := range c.Servers() {
		_, err := droverv1.NewACLServiceClient(s.Conn()).Self(as(ctx, secret), &droverv1.ACLTokenSelfRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("the deleted token on %s, which applied its deletion: %v, want Unauthenticated", s, err)
		}
	}
}

// waitApplied waits until every server has applied the raft index.
func waitApplied(ctx context.Context, t *testing.T, index uint64, servers ...*cluster.Server) {
	t.Helper()
	for _, s := range servers {
		poll(ctx, t, fmt.Sprintf("%s to apply index %d", s, index), func() (bool, string) {
			d, err := droverv1.NewOperatorServiceClient(s.Conn()).StateDigest(ctx, &droverv1.StateDigestRequest{})
			return err == nil && d.GetIndex() >= index, fmt.Sprint(d.GetIndex(), err)
		})
	}
}

// dataDigests are the leader's digests of every table but the servers'
// own records, which change by themselves.
func dataDigests(ctx context.Context, t *testing.T, s *cluster.Server) map[string]string {
	t.Helper()
	d, err := droverv1.NewOperatorServiceClient(s.Conn()).StateDigest(ctx, &droverv1.StateDigestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for table, digest := range d.GetTables() {
		if table != "servers" && table != "index" {
			out[table] = digest
		}
	}
	return out
}

// checkFiltered checks that a token reading only the web-* jobs lists and
// streams only those, through either server.
func checkFiltered(ctx context.Context, t *testing.T, admin droverv1.ACLServiceClient, servers ...*cluster.Server) {
	t.Helper()
	web, db := mock.Job(1), mock.Job(1)
	web.Id, db.Id = "web-filtered", "db-filtered"
	// db first: a stream that leaked it would send it before web.
	for _, j := range []*droverv1.Job{db, web} {
		if _, err := registerJob(ctx, servers[0].Conn(), j, ""); err != nil {
			t.Fatal(err)
		}
	}
	secret := createToken(ctx, t, admin, clientToken(applyPolicy(ctx, t, admin, "web-reader",
		"job \"web-*\" { policy = \"read\" }\nevent { policy = \"read\" }\n")))
	// A server honours a new token once it has applied its creation.
	created, err := droverv1.NewOperatorServiceClient(servers[0].Conn()).StateDigest(ctx, &droverv1.StateDigestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(ctx, t, created.GetIndex(), servers...)
	for _, s := range servers {
		list, err := droverv1.NewJobServiceClient(s.Conn()).List(as(ctx, secret), &droverv1.ListJobsRequest{})
		if err != nil {
			t.Fatalf("list jobs on %s: %v", s, err)
		}
		if len(list.GetJobs()) != 1 || list.GetJobs()[0].GetId() != web.GetId() {
			t.Errorf("jobs listed on %s for the web reader: %v, want only %s", s, list.GetJobs(), web.GetId())
		}
		if _, err := droverv1.NewJobServiceClient(s.Conn()).Get(as(ctx, secret), &droverv1.GetJobRequest{JobId: db.GetId()}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("get %s on %s for the web reader: %v, want PermissionDenied", db.GetId(), s, err)
		}
		streamCtx, cancel := context.WithCancel(as(ctx, secret))
		stream, err := droverv1.NewEventServiceClient(s.Conn()).Stream(streamCtx, &droverv1.StreamEventsRequest{FromIndex: 1,
			Topics: []droverv1.Topic{droverv1.Topic_TOPIC_JOB}})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for !seen[web.GetId()] {
			batch, err := stream.Recv()
			if err != nil {
				t.Fatalf("event stream on %s: %v", s, err)
			}
			for _, ev := range batch.GetEvents() {
				seen[ev.GetJob().GetId()] = true
			}
		}
		cancel()
		if seen[db.GetId()] {
			t.Errorf("the event stream on %s sent the web reader events of %s", s, db.GetId())
		}
	}
}

// checkServerActsForCluster: a server certificate without a token makes
// the operator calls a server makes for the cluster (a server rebuilding
// itself lists and removes raft peers), on a follower and, forwarded, on
// the leader; a client certificate without a token may not.
func checkServerActsForCluster(ctx context.Context, t *testing.T, c *cluster.Cluster, servers ...*cluster.Server) {
	t.Helper()
	creds, err := c.Certs().Server().ClientCredentials()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		conn := s.Dial(grpc.WithTransportCredentials(creds))
		if _, err := droverv1.NewOperatorServiceClient(conn).RaftListPeers(as(ctx, ""), &droverv1.RaftListPeersRequest{}); err != nil {
			t.Errorf("RaftListPeers on %s with a server certificate and no token: %v", s, err)
		}
		if _, err := droverv1.NewOperatorServiceClient(s.Conn()).RaftListPeers(as(ctx, ""), &droverv1.RaftListPeersRequest{}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("RaftListPeers on %s with a client certificate and no token: %v, want PermissionDenied", s, err)
		}
	}
}
