// Package testcerts writes a throwaway cluster CA and certificates it signed
// (a server's, a client's) for tests of drover's mutual TLS. Only tests
// import it.
package testcerts

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/tlsconfig"
)

// Validity is how long the certificates are valid: long enough for any
// test, short enough that a leaked one is soon useless.
const Validity = 2 * time.Hour

// Set is the files of one CA and the certificates it signed.
type Set struct {
	CAFile         string
	ServerCertFile string
	ServerKeyFile  string
	ClientCertFile string
	ClientKeyFile  string

	// ca and caKey sign the certificates of WriteServer and WriteClient;
	// nil in a Set not made by Write.
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// Server is the TLS configuration of a server: its certificate carries the
// DNS SAN tlsconfig.ServerName and the IP SAN 127.0.0.1, and may be used to
// serve and to call other servers.
func (s *Set) Server() tlsconfig.Config {
	return tlsconfig.Config{CAFile: s.CAFile, CertFile: s.ServerCertFile, KeyFile: s.ServerKeyFile}
}

// Client is the TLS configuration of a client (an agent or operator): its
// certificate carries the DNS SAN tlsconfig.ClientName.
func (s *Set) Client() tlsconfig.Config {
	return tlsconfig.Config{CAFile: s.CAFile, CertFile: s.ClientCertFile, KeyFile: s.ClientKeyFile}
}

// New writes a new set into a temporary directory of t's, failing t on
// error.
func New(t testing.TB) *Set {
	t.Helper()
	s, err := Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Write generates a new CA, server certificate and client certificate
// (ECDSA P-256) and writes them as PEM files into dir: ca.pem, server.pem,
// server-key.pem, client.pem and client-key.pem.
func Write(dir string) (*Set, error) {
	ca, caKey, err := newCA()
	if err != nil {
		return nil, err
	}
	s := &Set{CAFile: filepath.Join(dir, "ca.pem"), ca: ca, caKey: caKey}
	if err := writePEM(s.CAFile, "CERTIFICATE", ca.Raw); err != nil {
		return nil, err
	}
	s.ServerCertFile, s.ServerKeyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	if _, err := s.WriteServer(s.ServerCertFile, s.ServerKeyFile); err != nil {
		return nil, err
	}
	s.ClientCertFile, s.ClientKeyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if _, err := s.WriteClient(s.ClientCertFile, s.ClientKeyFile); err != nil {
		return nil, err
	}
	return s, nil
}

// WriteServer signs a new server certificate (as Server's: DNS SAN
// tlsconfig.ServerName, IP SAN 127.0.0.1, server and client auth) with a new
// key and writes both to the given paths, replacing what is there: for
// tests that rotate certificates. It returns the certificate.
func (s *Set) WriteServer(certFile, keyFile string) (*x509.Certificate, error) {
	return s.issue(certFile, keyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: tlsconfig.ServerName},
		DNSNames:    []string{tlsconfig.ServerName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// WriteClient is WriteServer for a client certificate (as Client's: DNS SAN
// tlsconfig.ClientName, client auth only).
func (s *Set) WriteClient(certFile, keyFile string) (*x509.Certificate, error) {
	return s.issue(certFile, keyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: tlsconfig.ClientName},
		DNSNames:    []string{tlsconfig.ClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// WriteBundle writes the certificates of the CA files, in order, into one
// CA file at path, replacing what is there: the bundle of old and new CA
// that a CA rotation goes through.
func WriteBundle(path string, caFiles ...string) error {
	var data []byte
	for _, f := range caFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("testcerts: %w", err)
		}
		data = append(data, pem...)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("testcerts: %w", err)
	}
	return nil
}

// newCA makes a self-signed CA certificate and its key.
func newCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("testcerts: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "drover test CA"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := sign(tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("testcerts: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("testcerts: CA certificate: %w", err)
	}
	return ca, key, nil
}

// issue signs tmpl with the set's CA and a new key, and writes the
// certificate to certFile and the key to keyFile.
func (s *Set) issue(certFile, keyFile string, tmpl *x509.Certificate) (*x509.Certificate, error) {
	if s.ca == nil || s.caKey == nil {
		return nil, errors.New("testcerts: this set holds no CA key (only Write makes sets that can sign)")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testcerts: key for %s: %w", certFile, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := sign(tmpl, s.ca, &key.PublicKey, s.caKey)
	if err != nil {
		return nil, fmt.Errorf("testcerts: certificate %s: %w", certFile, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testcerts: certificate %s: %w", certFile, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("testcerts: key for %s: %w", certFile, err)
	}
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writePEM(keyFile, "PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	return cert, nil
}

// sign fills in serial number and validity and signs tmpl with parent's key.
func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, parentKey *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Minute) // tolerate a little clock skew
	tmpl.NotAfter = now.Add(Validity)
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
}

// writePEM writes one PEM block to path, readable by the owner only.
func writePEM(path, typ string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("testcerts: %w", err)
	}
	return nil
}

// Probe connects to addr with TLS and reports whether the server kept the
// connection: a refused caller's handshake or first read fails at once, an
// accepted one's read times out waiting for a server that speaks only when
// spoken to (raft). wait is how long silence counts as accepted.
func Probe(addr string, cfg *tls.Config, wait time.Duration) error {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	if err == nil {
		return errors.New("the server sent data unasked")
	}
	return err
}
