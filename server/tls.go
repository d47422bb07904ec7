package server

import (
	"context"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/droverhq/drover/internal/tlsconfig"
	"github.com/droverhq/drover/server/raftnode"
)

// transportSecurity is how this server's connections are secured, built
// once from Config.TLS. Without TLS every field but dial is nil and dial is
// plaintext.
//
// With TLS all of them read their certificates from one
// tlsconfig.Reloader at every new handshake, so that ReloadTLS rotates the
// certificates of the gRPC listener, of the calls to other servers and of
// raft together.
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
	// reloader holds the certificates the others use.
	reloader *tlsconfig.Reloader
}

// newTransportSecurity loads the certificates of cfg. A certificate that
// other servers would refuse (no server identity, not signed by the CA) is
// an error here, at startup, rather than a cluster that cannot form.
func newTransportSecurity(cfg tlsconfig.Config) (transportSecurity, error) {
	if !cfg.Enabled() {
		return transportSecurity{dial: insecure.NewCredentials()}, nil
	}
	r, err := tlsconfig.NewServerReloader(cfg)
	if err != nil {
		return transportSecurity{}, err
	}
	listen, dial := r.ServerTLS(), r.ClientTLS()
	return transportSecurity{
		listen:        credentials.NewTLS(listen),
		dial:          credentials.NewTLS(dial),
		raft:          &raftnode.TLS{Listen: tlsconfig.OnlyServers(listen), Dial: dial},
		requireServer: tlsconfig.RequireServerPeer,
		reloader:      r,
	}, nil
}

// ReloadTLS reads the TLS CA, certificate and key files again (drover
// server does on SIGHUP). Files that pass the checks made at startup
// replace the certificates for every connection opened from now on, gRPC
// and raft, accepted and dialed; connections already open keep their
// session. Files that do not are refused: the server goes on with the
// certificates it had, and the error names the file at fault. Either way
// the outcome is logged. Without TLS configured ReloadTLS does nothing and
// returns nil.
func (s *Server) ReloadTLS() error {
	r := s.security.reloader
	if r == nil {
		return nil
	}
	files := r.Config()
	changed, err := r.Reload()
	if err != nil {
		s.logger.Error("TLS files refused; new connections still use the certificates loaded before",
			"err", err, "ca_file", files.CAFile, "cert_file", files.CertFile, "key_file", files.KeyFile)
		return err
	}
	s.logger.Info("TLS certificates reloaded; new connections use them", "changes", changed,
		"ca_file", files.CAFile, "cert_file", files.CertFile, "key_file", files.KeyFile)
	return nil
}
