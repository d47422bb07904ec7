package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
)

// ServerName is the DNS SAN that marks a certificate as a drover server's.
// Every dialer expects it as the host name of the server it reaches.
const ServerName = "server.drover"

// ClientName is the DNS SAN suggested for agents' and operators'
// certificates. Nothing checks it: any certificate the CA signed that is
// not a server's is a client's.
const ClientName = "client.drover"

// ErrNotServer is the reason a caller without a server certificate is
// refused a server-only call or connection.
var ErrNotServer = errors.New("the peer certificate is not a server certificate (DNS SAN " + ServerName + ")")

// IsServer reports whether cert carries the server identity.
func IsServer(cert *x509.Certificate) bool {
	if cert == nil {
		return false
	}
	for _, name := range cert.DNSNames {
		if strings.EqualFold(name, ServerName) {
			return true
		}
	}
	return false
}

// VerifyServerPeer accepts a connection only when the peer's certificate
// was verified against the CA and is a server's. It fits
// tls.Config.VerifyConnection.
func VerifyServerPeer(cs tls.ConnectionState) error {
	if !VerifiedServer(cs) {
		return ErrNotServer
	}
	return nil
}

// VerifiedServer reports whether the connection's peer presented a
// certificate that was verified against the CA and carries the server
// identity. Unverified certificates never count.
//
// It is meant for the states of listeners, where crypto/tls verifies the
// caller and records VerifiedChains (also with Reloader.ServerTLS). A
// dialer of Reloader.ClientTLS verifies the server itself and its states
// have no VerifiedChains, so VerifiedServer is false for them: it errs
// towards refusing, never towards trusting.
func VerifiedServer(cs tls.ConnectionState) bool {
	return len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 && IsServer(cs.VerifiedChains[0][0])
}
