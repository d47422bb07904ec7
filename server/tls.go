package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/droverhq/drover/internal/tlsconfig"
	"github.com/droverhq/drover/server/raftnode"
)

// transportSecurity is how this server's connections are secured, built
// once from Config.TLS. Without TLS every field but dial is nil and dial is
// plaintext.
type transportSecurity struct {
	// listen secures the gRPC listener.
	listen credentials.TransportCredentials
	// dial secures this server's calls to other servers (Info, Join,
	// forwarding to the leader) and its scheduler workers' calls to its own
	// endpoint. It presents the server certificate, so those calls pass
	// the server-only check.
	dial credentials.TransportCredentials
	// raft secures the raft transport: only servers may connect.
	raft *raftnode.TLS
	// requireServer holds server-only RPCs to callers with a server
	// certificate.
	requireServer func(context.Context) error
}

// newTransportSecurity loads the certificates of cfg.
func newTransportSecurity(cfg tlsconfig.Config) (transportSecurity, error) {
	if !cfg.Enabled() {
		return transportSecurity{dial: insecure.NewCredentials()}, nil
	}
	listen, err := cfg.ServerTLS()
	if err != nil {
		return transportSecurity{}, err
	}
	// Other servers would refuse it anyway; say so at startup instead.
	if leaf := listen.Certificates[0].Leaf; !tlsconfig.IsServer(leaf) {
		return transportSecurity{}, fmt.Errorf("tls: certificate %s is not a server certificate: it needs the DNS SAN %s", cfg.CertFile, tlsconfig.ServerName)
	}
	dial, err := cfg.ClientTLS()
	if err != nil {
		return transportSecurity{}, err
	}
	return transportSecurity{
		listen:        credentials.NewTLS(listen),
		dial:          credentials.NewTLS(dial),
		raft:          &raftnode.TLS{Listen: tlsconfig.OnlyServers(listen), Dial: dial},
		requireServer: tlsconfig.RequireServerPeer,
	}, nil
}
