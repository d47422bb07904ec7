package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// MinVersion is the oldest protocol accepted. Go negotiates TLS 1.3
// whenever both ends support it, which every drover process does; 1.2
// stays allowed for other tools (load balancers' health checks, grpcurl
// builds) that may not.
const MinVersion = tls.VersionTLS12

// ServerTLS is the configuration of a listener: it presents this process's
// certificate and requires every caller to present one the CA signed.
func (c Config) ServerTLS() (*tls.Config, error) {
	pool, certs, err := c.load(c.Validate)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: certs,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   MinVersion,
	}, nil
}

// ClientTLS is the configuration of a dialer: it verifies that the other end
// holds a server certificate the CA signed (host name ServerName, whatever
// address was dialed) and presents this process's certificate, if it has
// one.
func (c Config) ClientTLS() (*tls.Config, error) {
	pool, certs, err := c.load(c.ValidateClient)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: certs,
		RootCAs:      pool,
		ServerName:   ServerName,
		MinVersion:   MinVersion,
	}, nil
}

// OnlyServers returns a copy of a listener's configuration that also
// refuses every caller whose verified certificate is not a server's: for
// the raft transport, which no client may speak. When cfg picks the
// configuration per handshake (Reloader.ServerTLS), the check is added to
// each one it picks, since crypto/tls then uses that one's
// VerifyConnection, not cfg's.
func OnlyServers(cfg *tls.Config) *tls.Config {
	out := cfg.Clone()
	out.VerifyConnection = VerifyServerPeer
	if pick := cfg.GetConfigForClient; pick != nil {
		out.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			picked, err := pick(hello)
			if err != nil || picked == nil {
				return picked, err // nil: crypto/tls goes on with out, which checks
			}
			picked = picked.Clone()
			picked.VerifyConnection = VerifyServerPeer
			return picked, nil
		}
	}
	return out
}

// load validates c for its use and reads the CA pool and this process's
// certificate (none for a client without one).
func (c Config) load(validate func() error) (*x509.CertPool, []tls.Certificate, error) {
	if err := validate(); err != nil {
		return nil, nil, err
	}
	if !c.Enabled() {
		return nil, nil, fmt.Errorf("tls: not configured")
	}
	pool, err := c.loadCA()
	if err != nil {
		return nil, nil, err
	}
	certs, err := c.loadCert()
	if err != nil {
		return nil, nil, err
	}
	return pool, certs, nil
}
