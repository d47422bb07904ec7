package tlsconfig

import (
	"context"
	"fmt"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// ServerCredentials are the gRPC transport credentials of a listener (see
// ServerTLS).
func (c Config) ServerCredentials() (credentials.TransportCredentials, error) {
	cfg, err := c.ServerTLS()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// ClientCredentials are the gRPC transport credentials of a dialer (see
// ClientTLS).
func (c Config) ClientCredentials() (credentials.TransportCredentials, error) {
	cfg, err := c.ClientTLS()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// RequireServerPeer fails unless the caller of the gRPC call in ctx
// presented a verified server certificate over TLS.
func RequireServerPeer(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return fmt.Errorf("no peer in the call's context: %w", ErrNotServer)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return fmt.Errorf("peer %s did not connect over TLS: %w", p.Addr, ErrNotServer)
	}
	if !VerifiedServer(info.State) {
		return fmt.Errorf("peer %s: %w", p.Addr, ErrNotServer)
	}
	return nil
}
