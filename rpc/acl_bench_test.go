package rpc_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// BenchmarkACLOverhead measures Node.Register and Job.Register with 16
// callers, with ACLs off and on (a client token whose policy grants job
// write on a glob, resolved from the cache on every call), for the ratio
// in docs/benchmarks.md.
func BenchmarkACLOverhead(b *testing.B) {
	const callers = 16
	for _, aclOn := range []bool{false, true} {
		for _, method := range []string{"Node.Register", "Job.Register"} {
			b.Run(fmt.Sprintf("acl=%v/%s", aclOn, method), func(b *testing.B) {
				srv := testserver.Start(b, func(c *server.Config) { c.ACLEnabled = aclOn; c.Scheduler.NumWorkers = 0 })
				ctx := context.Background()
				if aclOn {
					ctx = as(ctx, benchToken(b, srv))
				}
				nodes := make([]droverv1.NodeServiceClient, callers)
				jobs := make([]droverv1.JobServiceClient, callers)
				for i := range callers {
					conn := testserver.Dial(b, srv.RPCAddr())
					nodes[i], jobs[i] = droverv1.NewNodeServiceClient(conn), droverv1.NewJobServiceClient(conn)
				}
				call := func(caller, i int) error {
					_, err := nodes[caller].Register(ctx, &droverv1.RegisterNodeRequest{Node: mock.Node()})
					return err
				}
				if method == "Job.Register" {
					call = func(caller, i int) error {
						j := mock.Job(1)
						j.Id = fmt.Sprintf("web-%d", i)
						_, err := jobs[caller].Register(ctx, &droverv1.RegisterJobRequest{Job: j})
						return err
					}
				}
				b.ResetTimer()
				latencies, elapsed := runCallers(b, callers, call)
				b.StopTimer()
				reportLatencies(b, latencies, elapsed)
			})
		}
	}
}

// benchToken bootstraps ACLs and returns a client token that may write
// the web-* jobs.
func benchToken(b *testing.B, srv *testserver.Server) string {
	b.Helper()
	c := droverv1.NewACLServiceClient(srv.Conn)
	boot, err := c.Bootstrap(context.Background(), &droverv1.ACLBootstrapRequest{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := as(context.Background(), boot.GetSecretId())
	if _, err := c.ApplyPolicy(ctx, &droverv1.ApplyACLPolicyRequest{Policy: &droverv1.ACLPolicy{Name: "web", Rules: "job \"web-*\" { policy = \"write\" }\njob \"*\" { policy = \"read\" }"}}); err != nil {
		b.Fatal(err)
	}
	tok, err := c.CreateToken(ctx, &droverv1.CreateACLTokenRequest{Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT, Policies: []string{"web"}})
	if err != nil {
		b.Fatal(err)
	}
	return tok.GetSecretId()
}
