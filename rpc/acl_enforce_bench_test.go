package rpc

import (
	"context"
	"crypto/sha256"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// BenchmarkAuthorize is the enforcer's cost for one call on the hot path:
// a Job.Register by a client token whose compiled ACL is cached, and a
// Node.Register, which carries no token.
func BenchmarkAuthorize(b *testing.B) {
	st, err := state.NewStateStore()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.ApplyACLPolicies(1, &droverv1.ACLPolicyEntry{Upserts: []*droverv1.ACLPolicy{{Name: "web",
		Rules: "job \"web-*\" { policy = \"write\" }\njob \"*\" { policy = \"read\" }"}}}); err != nil {
		b.Fatal(err)
	}
	hash := sha256.Sum256([]byte("secret"))
	if _, err := st.ApplyACLTokens(2, &droverv1.ACLTokenEntry{Upserts: []*droverv1.ACLToken{{AccessorId: "a", SecretHash: hash[:],
		Type: droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT, Policies: []string{"web"}}}}); err != nil {
		b.Fatal(err)
	}
	stateOf := func() *state.StateStore { return st }
	e := &enforcer{resolver: newResolver(true, stateOf, nil), state: stateOf}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(TokenMetadataKey, "secret"))
	for _, tc := range []struct {
		name, method string
		req          any
	}{
		{"Job.Register", droverv1.JobService_Register_FullMethodName, &droverv1.RegisterJobRequest{Job: &droverv1.Job{Id: "web-1"}}},
		{"Node.Register", droverv1.NodeService_Register_FullMethodName, &droverv1.RegisterNodeRequest{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := e.authorize(ctx, tc.method, tc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
