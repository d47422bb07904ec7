package cluster

import (
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
)

// TLS runs the cluster with mutual TLS: New writes a CA, a server and a
// client certificate (see internal/testcerts) into <tmp>/tls, starts every
// server with -tls-ca-file, -tls-cert-file and -tls-key-file, and makes the
// harness's own connections (Conn, Dial) present the client certificate.
// The harness calls no server-only RPC; a test that needs one dials with
// the server certificate (Certs).
func TLS() Option { return func(o *options) { o.tls = true } }

// TLSCerts is TLS with certificates the test made (testcerts.Write) instead
// of new ones, so that it can issue more from the same CA, e.g. to rotate
// them.
func TLSCerts(certs *testcerts.Set) Option {
	return func(o *options) {
		o.tls = true
		o.certs = certs
	}
}

// Certs returns the certificates of a cluster started with TLS, nil
// otherwise.
func (c *Cluster) Certs() *testcerts.Set { return c.certs }

// ClientTLS returns the harness's TLS identity, the client certificate of
// Certs, which Conn and Dial present; nil without TLS. The connections read
// it at each handshake: a test that rotates certificates rewrites Certs'
// client files and CA file and calls Reload on it, as an agent would.
func (c *Cluster) ClientTLS() *tlsconfig.Reloader { return c.clientTLS }

// setupTLS writes the certificates (unless the test gave them) and sets
// the servers' flags and the harness's dial options.
func (c *Cluster) setupTLS() {
	c.t.Helper()
	certs := c.opts.certs
	if certs == nil {
		dir := filepath.Join(c.dir, "tls")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			c.t.Fatal(err)
		}
		var err error
		if certs, err = testcerts.Write(dir); err != nil {
			c.t.Fatal(err)
		}
	}
	client, err := tlsconfig.NewClientReloader(certs.Client())
	if err != nil {
		c.t.Fatal(err)
	}
	c.certs, c.clientTLS = certs, client
	c.opts.args = append(c.opts.args, "-tls-ca-file", certs.CAFile, "-tls-cert-file", certs.ServerCertFile, "-tls-key-file", certs.ServerKeyFile)
	c.opts.dial = append(c.opts.dial, grpc.WithTransportCredentials(client.ClientCredentials()))
}
