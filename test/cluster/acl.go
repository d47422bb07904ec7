package cluster

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/droverhq/drover/rpc"
)

// ACL starts every server with -acl-enabled. The harness's own
// connections send the token given to SetToken, once there is one: until
// then only the calls open to anyone (ClusterService.Info, the ACL
// bootstrap) work, which is all WaitLeader needs.
func ACL() Option { return func(o *options) { o.acl = true } }

// SetToken makes the harness's connections call with the ACL token secret.
func (c *Cluster) SetToken(secret string) { c.token.secret.Store(&secret) }

// harnessToken is the harness's ACL token, read at every call.
type harnessToken struct {
	secret atomic.Pointer[string]
}

// GetRequestMetadata adds the harness's token, unless the call carries its
// own (a test calling as someone else, or as nobody with an empty one).
func (h *harnessToken) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(rpc.TokenMetadataKey)) > 0 {
		return nil, nil
	}
	if s := h.secret.Load(); s != nil && *s != "" {
		return map[string]string{rpc.TokenMetadataKey: *s}, nil
	}
	return nil, nil
}

func (h *harnessToken) RequireTransportSecurity() bool { return false }

// setupACL sets the servers' flag and the harness's credentials.
func (c *Cluster) setupACL() {
	c.opts.args = append(c.opts.args, "-acl-enabled")
	c.opts.dial = append(c.opts.dial, grpc.WithPerRPCCredentials(&c.token))
}
