package cluster

import (
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/testcerts"
)

// TLS runs the cluster with mutual TLS: New writes a CA, a server and a
// client certificate (see internal/testcerts) into <tmp>/tls, starts every
// server with -tls-ca-file, -tls-cert-file and -tls-key-file, and makes the
// harness's own connections (Conn, Dial) present the client certificate.
// The harness calls no server-only RPC; a test that needs one dials with
// the server certificate (Certs).
func TLS() Option { return func(o *options) { o.tls = true } }

// Certs returns the certificates of a cluster started with TLS, nil
// otherwise.
func (c *Cluster) Certs() *testcerts.Set { return c.certs }

// setupTLS writes the certificates and sets the servers' flags and the
// harness's dial options.
func (c *Cluster) setupTLS() {
	c.t.Helper()
	dir := filepath.Join(c.dir, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	certs, err := testcerts.Write(dir)
	if err != nil {
		c.t.Fatal(err)
	}
	creds, err := certs.Client().ClientCredentials()
	if err != nil {
		c.t.Fatal(err)
	}
	c.certs = certs
	c.opts.args = append(c.opts.args, "-tls-ca-file", certs.CAFile, "-tls-cert-file", certs.ServerCertFile, "-tls-key-file", certs.ServerKeyFile)
	c.opts.dial = append(c.opts.dial, grpc.WithTransportCredentials(creds))
}
