package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// Reloader holds a process's TLS material, the CA certificates and its own
// certificate, and hands out configurations that read what it holds at
// every new handshake. Reload reads the files again, so certificates and
// the CA can be rotated without a restart. A connection keeps the session
// it negotiated: only connections opened after a Reload use the new
// material, and nothing already open is cut.
//
// A Reloader is safe for concurrent use.
type Reloader struct {
	cfg    Config
	server bool // the certificate must be a server's (NewServerReloader)

	mu  sync.Mutex // serializes Reload, so that two never interleave their swaps
	cur atomic.Pointer[material]
}

// material is one consistent read of the files. It is never changed once
// published: Reload swaps in a new one.
type material struct {
	cas  []*x509.Certificate
	pool *x509.CertPool
	// cert is this process's certificate and leaf its parsed first
	// certificate; both nil for a client without one.
	cert *tls.Certificate
	leaf *x509.Certificate
	// listen is the configuration of a listener's handshakes, built once
	// per read rather than once per handshake.
	listen *tls.Config
}

// NewServerReloader reads a server's files: all three are required, the
// certificate must match the key, carry the server identity (IsServer) and
// verify against the CA for both serving and calling other servers. Every
// Reload checks the same.
func NewServerReloader(c Config) (*Reloader, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return newReloader(c, true)
}

// NewClientReloader reads the files of a caller (an agent, a tool): the CA
// is required, the certificate optional; one that is given must match its
// key and verify against the CA as a client's. Every Reload checks the same.
func NewClientReloader(c Config) (*Reloader, error) {
	if err := c.ValidateClient(); err != nil {
		return nil, err
	}
	return newReloader(c, false)
}

func newReloader(c Config, server bool) (*Reloader, error) {
	if !c.Enabled() {
		return nil, errors.New("tls: not configured")
	}
	r := &Reloader{cfg: c, server: server}
	m, err := r.read()
	if err != nil {
		return nil, err
	}
	r.cur.Store(m)
	return r, nil
}

// Config returns the files the Reloader reads.
func (r *Reloader) Config() Config { return r.cfg }

// Certificate returns the certificate new connections present, nil for a
// client without one.
func (r *Reloader) Certificate() *x509.Certificate { return r.cur.Load().leaf }

// Reload reads the CA, certificate and key files again and checks them as
// the constructor did. If anything is wrong it keeps the material it had
// and returns the error, which names the file at fault; otherwise new
// handshakes use the new material from now on, and changed describes what
// differs from before (serials and expiry, CA certificates added or
// removed), for the log.
func (r *Reloader) Reload() (changed string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, err := r.read()
	if err != nil {
		return "", err
	}
	old := r.cur.Swap(m)
	return describeChange(old, m), nil
}

// read loads and checks the files.
func (r *Reloader) read() (*material, error) {
	cas, err := r.cfg.readCA()
	if err != nil {
		return nil, err
	}
	certs, err := r.cfg.loadCert()
	if err != nil {
		return nil, err
	}
	m := &material{cas: cas, pool: poolOf(cas)}
	if len(certs) > 0 {
		if m.leaf, err = r.checkCert(&certs[0], m.pool); err != nil {
			return nil, err
		}
		m.cert = &certs[0]
	}
	m.listen = &tls.Config{
		Certificates: certs,
		ClientCAs:    m.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   MinVersion,
	}
	return m, nil
}

// checkCert checks this process's certificate against the CA pool it will
// be used with. Peers would refuse a certificate that fails, so refusing it
// here, before it replaces one that works, keeps the process reachable.
func (r *Reloader) checkCert(cert *tls.Certificate, pool *x509.CertPool) (*x509.Certificate, error) {
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: certificate %s: %w", r.cfg.CertFile, err)
		}
	}
	if r.server && !IsServer(leaf) {
		return nil, fmt.Errorf("tls: certificate %s is not a server certificate: it needs the DNS SAN %s", r.cfg.CertFile, ServerName)
	}
	intermediates := x509.NewCertPool()
	for i, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("tls: certificate %s: intermediate %d: %w", r.cfg.CertFile, i+1, err)
		}
		intermediates.AddCert(c)
	}
	// A server both serves and calls other servers, so its certificate
	// must be good for both; a caller's only for calling.
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if r.server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	for _, usage := range usages {
		opts := x509.VerifyOptions{Roots: pool, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{usage}}
		if _, err := leaf.Verify(opts); err != nil {
			return nil, fmt.Errorf("tls: certificate %s does not verify against the CA in %s: %w", r.cfg.CertFile, r.cfg.CAFile, err)
		}
	}
	return leaf, nil
}

// ServerTLS is the configuration of a listener, as Config.ServerTLS, but
// each handshake takes the certificate and the client CAs the Reloader
// holds at that moment. Client certificates are required and verified by
// crypto/tls itself, so the connection state carries VerifiedChains and
// VerifiedServer and RequireServerPeer work as with a fixed configuration.
// A resumed TLS session is verified again against the client CAs of the
// handshake's configuration, so once a CA is dropped its certificates do
// not come back through resumption either. OnlyServers applies to it.
func (r *Reloader) ServerTLS() *tls.Config {
	return &tls.Config{
		// These settings apply only until GetConfigForClient answers; they
		// are the same as those of the configuration it returns.
		ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load().listen, nil
		},
	}
}

// ClientTLS is the configuration of a dialer, as Config.ClientTLS: it
// presents the current certificate, if any, and accepts only a server
// whose certificate verifies against the current CA with the host name
// ServerName.
//
// crypto/tls has no per-handshake configuration on the client side, and
// its RootCAs is fixed once the configuration is in use, so the built-in
// verification is turned off (InsecureSkipVerify) and VerifyConnection does
// the same verification against the CA pool held now. It runs on every
// handshake and fails it on error, so nothing is accepted that the
// built-in check would have refused; the one visible difference is that
// the dialer's connection state has no VerifiedChains (VerifiedServer is
// false there; it is meant for listeners' states).
func (r *Reloader) ClientTLS() *tls.Config {
	return &tls.Config{
		// ServerName is not what is verified (verifyServer uses the
		// constant), but gRPC takes it as the connection's authority.
		ServerName:           ServerName,
		MinVersion:           MinVersion,
		InsecureSkipVerify:   true, // verifyServer checks the chain and the name instead, see above
		VerifyConnection:     r.verifyServer,
		GetClientCertificate: r.clientCertificate,
	}
}

// ServerCredentials are the gRPC transport credentials of ServerTLS.
func (r *Reloader) ServerCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(r.ServerTLS())
}

// ClientCredentials are the gRPC transport credentials of ClientTLS.
func (r *Reloader) ClientCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(r.ClientTLS())
}

// clientCertificate presents the current certificate, or none (an empty
// one, as crypto/tls sends without Certificates) for a caller without one.
func (r *Reloader) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if cert := r.cur.Load().cert; cert != nil {
		return cert, nil
	}
	return &tls.Certificate{}, nil
}

// verifyServer is what crypto/tls would check of the server's certificate,
// against the CA pool held now.
func (r *Reloader) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server presented no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	opts := x509.VerifyOptions{
		Roots:         r.cur.Load().pool,
		Intermediates: intermediates,
		DNSName:       ServerName,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: the server's certificate does not verify against the CA in %s: %w", r.cfg.CAFile, err)
	}
	return nil
}

// describeChange says, in one line for the log, how now differs from
// before.
func describeChange(before, now *material) string {
	var cert string
	switch {
	case now.leaf == nil:
		cert = "no certificate"
	case before.leaf != nil && bytes.Equal(before.leaf.Raw, now.leaf.Raw):
		cert = fmt.Sprintf("certificate unchanged (serial %s, expires %s)", serial(now.leaf), expiry(now.leaf))
	case before.leaf == nil:
		cert = fmt.Sprintf("certificate serial %s, expires %s", serial(now.leaf), expiry(now.leaf))
	default:
		cert = fmt.Sprintf("certificate serial %s→%s, expires %s", serial(before.leaf), serial(now.leaf), expiry(now.leaf))
	}
	added, removed := diffCerts(before.cas, now.cas), diffCerts(now.cas, before.cas)
	if len(added) == 0 && len(removed) == 0 {
		return cert + "; CA unchanged"
	}
	var ca []string
	if len(added) > 0 {
		ca = append(ca, "added "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		ca = append(ca, "removed "+strings.Join(removed, ", "))
	}
	count := "1 certificate"
	if len(now.cas) != 1 {
		count = fmt.Sprintf("%d certificates", len(now.cas))
	}
	return fmt.Sprintf("%s; CA %s (now %s)", cert, strings.Join(ca, "; "), count)
}

// diffCerts names the certificates of b that are not in a.
func diffCerts(a, b []*x509.Certificate) []string {
	var out []string
	for _, c := range b {
		found := false
		for _, o := range a {
			if bytes.Equal(o.Raw, c.Raw) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("%q (serial %s)", c.Subject.String(), serial(c)))
		}
	}
	return out
}

// serial formats a serial number as openssl x509 -serial prints it.
func serial(c *x509.Certificate) string { return fmt.Sprintf("%X", c.SerialNumber) }

func expiry(c *x509.Certificate) string { return c.NotAfter.UTC().Format(time.RFC3339) }
