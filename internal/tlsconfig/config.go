// Package tlsconfig builds the mutual TLS settings of drover's gRPC and raft
// traffic from PEM files: one cluster CA, and certificates it signed.
//
// The identity model is Nomad's verify_server_hostname: a certificate whose
// DNS SANs include ServerName belongs to a server; any other certificate the
// CA signed (an agent's, an operator's) belongs to a client. Dialers verify
// the server they reach against the CA with ServerName as the expected host
// name, so server certificates need no IP SANs. Listeners require and verify
// a client certificate from every caller.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Config names the PEM files of one process's TLS identity. The zero value
// means TLS is off.
type Config struct {
	// CAFile holds the cluster CA certificate(s) that every peer's
	// certificate must chain to.
	CAFile string
	// CertFile and KeyFile hold this process's certificate (followed by any
	// intermediates) and its private key.
	CertFile string
	KeyFile  string
}

// Enabled reports whether any file is set: TLS is then on, and Validate
// says whether the settings are complete.
func (c Config) Enabled() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// Validate reports a configuration that is neither complete nor empty: a
// server needs all three files or none.
func (c Config) Validate() error {
	if !c.Enabled() || c.CAFile != "" && c.CertFile != "" && c.KeyFile != "" {
		return nil
	}
	return fmt.Errorf("tls: the CA file, certificate file and key file must be given together (missing: %s)", c.missing())
}

// ValidateClient is Validate for a caller, which may leave out its own
// certificate (servers will then refuse it, but it can name the CA): the CA
// file is required once anything is set, and the certificate and key go
// together.
func (c Config) ValidateClient() error {
	switch {
	case !c.Enabled():
		return nil
	case c.CAFile == "":
		return errors.New("tls: a CA file is required with a client certificate")
	case (c.CertFile == "") != (c.KeyFile == ""):
		return fmt.Errorf("tls: the certificate file and key file must be given together (missing: %s)", c.missing())
	}
	return nil
}

// missing lists the files not set, for messages.
func (c Config) missing() string {
	var out string
	for _, f := range []struct{ name, value string }{{"CA file", c.CAFile}, {"certificate file", c.CertFile}, {"key file", c.KeyFile}} {
		if f.value != "" {
			continue
		}
		if out != "" {
			out += ", "
		}
		out += f.name
	}
	return out
}

// loadCA reads the CA file into a pool.
func (c Config) loadCA() (*x509.CertPool, error) {
	cas, err := c.readCA()
	if err != nil {
		return nil, err
	}
	return poolOf(cas), nil
}

// readCA reads the certificates of the CA file. Like
// x509.CertPool.AppendCertsFromPEM it skips PEM blocks that are not plain
// certificates (keys, blocks with headers), but a CERTIFICATE block that
// does not parse is an error: during a CA rotation a damaged bundle would
// otherwise drop the new CA without a word.
func (c Config) readCA() ([]*x509.Certificate, error) {
	data, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls: read CA file: %w", err)
	}
	var cas []*x509.Certificate
	for n := 1; len(data) > 0; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tls: CA file %s: PEM block %d: %w", c.CAFile, n, err)
		}
		cas = append(cas, ca)
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("tls: CA file %s: no PEM certificate found", c.CAFile)
	}
	return cas, nil
}

// poolOf is a pool of the given CA certificates.
func poolOf(cas []*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	return pool
}

// loadCert reads the certificate and key pair; it is nil when neither file
// is set.
func (c Config) loadCert() ([]tls.Certificate, error) {
	if c.CertFile == "" && c.KeyFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load certificate %s with key %s: %w", c.CertFile, c.KeyFile, err)
	}
	return []tls.Certificate{cert}, nil
}
