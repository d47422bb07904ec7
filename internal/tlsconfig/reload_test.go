package tlsconfig_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
)

// serveTLS accepts connections with cfg on loopback until the test ends.
// After each handshake it sends the serial of the certificate the caller
// presented (hex, "none" without one) on a line and closes the
// connection; a failed handshake just closes it.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
				tc := conn.(*tls.Conn)
				if tc.Handshake() != nil {
					return
				}
				seen := "none"
				if peers := tc.ConnectionState().PeerCertificates; len(peers) > 0 {
					seen = fmt.Sprintf("%X", peers[0].SerialNumber)
				}
				_, _ = fmt.Fprintln(conn, seen)
			})
		}
	})
	return ln.Addr().String()
}

// handshake connects to a serveTLS listener with cfg and returns the
// server's certificate and the serial the server says it saw from us. It
// waits for the server's line, so that a refusal the server decides after
// the client's side of a TLS 1.3 handshake is done still shows as an error.
func handshake(t *testing.T, addr string, cfg *tls.Config) (server *x509.Certificate, seen string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: handshakeTimeout}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return nil, "", fmt.Errorf("no answer after the handshake: %w", err)
	}
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], strings.TrimSpace(line), nil
}

// hex formats a serial as serveTLS sends it.
func hex(n *big.Int) string { return fmt.Sprintf("%X", n) }

// rotating is a server's files in a directory of their own, which a test
// rewrites as an operator would.
type rotating struct {
	cfg tlsconfig.Config
}

// newRotating copies set's CA and gives the server a certificate of its
// own, returning the files and that certificate.
func newRotating(t *testing.T, set *testcerts.Set) (*rotating, *x509.Certificate) {
	t.Helper()
	dir := t.TempDir()
	r := &rotating{cfg: tlsconfig.Config{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server-key.pem"),
	}}
	r.setCA(t, set.CAFile)
	cert, err := set.WriteServer(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return r, cert
}

// setCA makes the CA file the concatenation of caFiles.
func (r *rotating) setCA(t *testing.T, caFiles ...string) {
	t.Helper()
	if err := testcerts.WriteBundle(r.cfg.CAFile, caFiles...); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(data))
}

// TestReload rewrites a server's files in ways an operator might and
// checks, with real handshakes in both directions, which certificate new
// connections get: the new one after a good rotation, the old one after
// Reload refused the files.
func TestReload(t *testing.T) {
	set := testcerts.New(t)
	foreign := testcerts.New(t) // another CA
	// A fixed peer of the same CA, for the reloading side's dials.
	peer := serveTLS(t, mustServerTLS(t, set.Server()))
	client := mustClientTLS(t, set.Client())

	tests := []struct {
		name string
		// change rewrites the files; it returns the certificate new
		// connections should get, nil for the one from before.
		change func(t *testing.T, f *rotating) *x509.Certificate
		// wantErr is part of Reload's error; "" for success.
		wantErr string
		// wantChange is part of Reload's description on success.
		wantChange string
	}{
		{
			name: "new certificate of the same CA",
			change: func(t *testing.T, f *rotating) *x509.Certificate {
				cert, err := set.WriteServer(f.cfg.CertFile, f.cfg.KeyFile)
				if err != nil {
					t.Fatal(err)
				}
				return cert
			},
			wantChange: "CA unchanged",
		},
		{
			name:       "nothing changed",
			change:     func(*testing.T, *rotating) *x509.Certificate { return nil },
			wantChange: "certificate unchanged",
		},
		{
			name: "key file without a key",
			change: func(t *testing.T, f *rotating) *x509.Certificate {
				write(t, f.cfg.KeyFile, "not a key")
				return nil
			},
			wantErr: "server-key.pem",
		},
		{
			name: "key of another certificate",
			change: func(t *testing.T, f *rotating) *x509.Certificate {
				dir := t.TempDir()
				if _, err := set.WriteServer(filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")); err != nil {
					t.Fatal(err)
				}
				copyFile(t, filepath.Join(dir, "c.pem"), f.cfg.CertFile) // the key stays the old one
				return nil
			},
			wantErr: "does not match",
		},
		{
			name: "client certificate",
			change: func(t *testing.T, f *rotating) *x509.Certificate {
				if _, err := set.WriteClient(f.cfg.CertFile, f.cfg.KeyFile); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			wantErr: "is not a server certificate",
		},
		{
			name: "certificate of another CA",
			change: func(t *testing.T, f *rotating) *x509.Certificate {
				if _, err := foreign.WriteServer(f.cfg.CertFile, f.cfg.KeyFile); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			wantErr: "does not verify against the CA",
		},
		{
			name: "CA file without a certificate",
			change: func(t *testing.T, f *rotating) *x509.Certificate {
				write(t, f.cfg.CAFile, "garbage")
				return nil
			},
			wantErr: "ca.pem: no PEM certificate found",
		},
		{
			name: "CA file with a damaged certificate",
			change: func(t *testing.T, f *rotating) *x509.Certificate {
				write(t, f.cfg.CAFile, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
				return nil
			},
			wantErr: "ca.pem: PEM block 1",
		},
		{
			name: "certificate file removed",
			change: func(t *testing.T, f *rotating) *x509.Certificate {
				if err := os.Remove(f.cfg.CertFile); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			wantErr: "server.pem",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, before := newRotating(t, set)
			r, err := tlsconfig.NewServerReloader(files.cfg)
			if err != nil {
				t.Fatal(err)
			}
			addr := serveTLS(t, r.ServerTLS())
			dialer := r.ClientTLS()

			want := tt.change(t, files)
			changed, err := r.Reload()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Reload: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Reload: %v, want an error containing %q", err, tt.wantErr)
			case err != nil:
				t.Logf("refused: %v", err)
			default:
				t.Logf("changed: %s", changed)
				if !strings.Contains(changed, tt.wantChange) {
					t.Errorf("Reload says %q, want it to mention %q", changed, tt.wantChange)
				}
			}
			if want == nil {
				want = before
			} else if !strings.Contains(changed, hex(before.SerialNumber)+"→"+hex(want.SerialNumber)) {
				t.Errorf("Reload says %q, want it to name the serials %X→%X", changed, before.SerialNumber, want.SerialNumber)
			}
			if got := r.Certificate(); got.SerialNumber.Cmp(want.SerialNumber) != 0 {
				t.Errorf("Certificate has serial %X, want %X", got.SerialNumber, want.SerialNumber)
			}

			// A new connection to the reloading listener gets want.
			server, _, err := handshake(t, addr, client)
			if err != nil {
				t.Fatalf("handshake with the listener: %v", err)
			}
			if server.SerialNumber.Cmp(want.SerialNumber) != 0 {
				t.Errorf("listener presented serial %X, want %X", server.SerialNumber, want.SerialNumber)
			}
			// A new connection the reloading side dials presents want.
			if _, seen, err := handshake(t, peer, dialer); err != nil {
				t.Errorf("handshake with a peer: %v", err)
			} else if seen != hex(want.SerialNumber) {
				t.Errorf("the peer saw serial %s, want %X", seen, want.SerialNumber)
			}
		})
	}
}

// TestReloadRotatesCA walks through the rotation to a new CA that keeps
// every connection possible: the CA file becomes a bundle of old and new,
// then the certificate is one of the new CA, then the old CA is dropped.
// After each step it checks who can connect to the reloading listener and
// whom the reloading side can connect to: in particular, once the new
// certificate is in place a client that trusts only the new CA connects
// and one that trusts only the old cannot, and once the old CA is dropped
// its certificates are refused both ways.
func TestReloadRotatesCA(t *testing.T) {
	oldCA, newCA := testcerts.New(t), testcerts.New(t)
	files, _ := newRotating(t, oldCA)
	r, err := tlsconfig.NewServerReloader(files.cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, r.ServerTLS())
	dialer := r.ClientTLS()

	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := testcerts.WriteBundle(bundle, oldCA.CAFile, newCA.CAFile); err != nil {
		t.Fatal(err)
	}
	// Callers of the reloading listener.
	callers := []struct {
		name string
		cfg  *tls.Config
	}{
		{"old CA only", mustClientTLS(t, oldCA.Client())},
		{"new CA only", mustClientTLS(t, newCA.Client())},
		{"bundle, old certificate", mustClientTLS(t, tlsconfig.Config{CAFile: bundle, CertFile: oldCA.ClientCertFile, KeyFile: oldCA.ClientKeyFile})},
		{"bundle, new certificate", mustClientTLS(t, tlsconfig.Config{CAFile: bundle, CertFile: newCA.ClientCertFile, KeyFile: newCA.ClientKeyFile})},
	}
	// Listeners the reloading side dials: each accepts callers of both CAs
	// and presents a certificate of one.
	peers := []struct {
		name, addr string
	}{
		{"old server certificate", serveTLS(t, mustServerTLS(t, tlsconfig.Config{CAFile: bundle, CertFile: oldCA.ServerCertFile, KeyFile: oldCA.ServerKeyFile}))},
		{"new server certificate", serveTLS(t, mustServerTLS(t, tlsconfig.Config{CAFile: bundle, CertFile: newCA.ServerCertFile, KeyFile: newCA.ServerKeyFile}))},
	}
	steps := []struct {
		name   string
		change func(t *testing.T)
		// callers and peers say who can connect, in the order above.
		callers []bool
		peers   []bool
	}{
		{"before", func(*testing.T) {}, []bool{true, false, true, false}, []bool{true, false}},
		{"CA bundle", func(t *testing.T) { files.setCA(t, bundle) }, []bool{true, false, true, true}, []bool{true, true}},
		{"new certificate", func(t *testing.T) {
			if _, err := newCA.WriteServer(files.cfg.CertFile, files.cfg.KeyFile); err != nil {
				t.Fatal(err)
			}
		}, []bool{false, true, true, true}, []bool{true, true}},
		{"old CA dropped", func(t *testing.T) { files.setCA(t, newCA.CAFile) }, []bool{false, true, false, true}, []bool{false, true}},
	}
	for _, step := range steps {
		step.change(t)
		changed, err := r.Reload()
		if err != nil {
			t.Fatalf("%s: Reload: %v", step.name, err)
		}
		t.Logf("%s: %s", step.name, changed)
		for i, c := range callers {
			_, _, err := handshake(t, addr, c.cfg)
			if got := err == nil; got != step.callers[i] {
				t.Errorf("%s: caller with %s connected = %v (%v), want %v", step.name, c.name, got, err, step.callers[i])
			}
		}
		for i, p := range peers {
			_, _, err := handshake(t, p.addr, dialer)
			if got := err == nil; got != step.peers[i] {
				t.Errorf("%s: dialing a peer with an %s: connected = %v (%v), want %v", step.name, p.name, got, err, step.peers[i])
			}
		}
	}
}

// TestReloadOnlyServers: the raft listener's check of the caller's identity
// holds for the configurations a Reloader picks per handshake, before and
// after a reload.
func TestReloadOnlyServers(t *testing.T) {
	set := testcerts.New(t)
	files, _ := newRotating(t, set)
	r, err := tlsconfig.NewServerReloader(files.cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, tlsconfig.OnlyServers(r.ServerTLS()))
	server, client := mustClientTLS(t, set.Server()), mustClientTLS(t, set.Client())
	for _, step := range []string{"before", "after a reload"} {
		if step != "before" {
			cert, err := set.WriteServer(files.cfg.CertFile, files.cfg.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Reload(); err != nil {
				t.Fatal(err)
			}
			if got, _, err := handshake(t, addr, server); err != nil || got.SerialNumber.Cmp(cert.SerialNumber) != 0 {
				t.Errorf("%s: a server got %v (%v), want serial %X", step, got, err, cert.SerialNumber)
			}
		}
		if _, _, err := handshake(t, addr, server); err != nil {
			t.Errorf("%s: a server caller was refused: %v", step, err)
		}
		if _, _, err := handshake(t, addr, client); err == nil {
			t.Errorf("%s: a client caller was let in", step)
		}
	}
}

// TestReloadConcurrent reloads new certificates while handshakes run (for
// the race detector): every handshake succeeds with one of the certificates
// written.
func TestReloadConcurrent(t *testing.T) {
	set := testcerts.New(t)
	files, first := newRotating(t, set)
	r, err := tlsconfig.NewServerReloader(files.cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, r.ServerTLS())
	peer := serveTLS(t, mustServerTLS(t, set.Server()))
	client := mustClientTLS(t, set.Client())

	var mu sync.Mutex
	issued := map[string]bool{hex(first.SerialNumber): true}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				got, _, err := handshake(t, addr, client)
				if err == nil {
					_, _, err = handshake(t, peer, r.ClientTLS())
				}
				if err == nil {
					mu.Lock()
					ok := issued[hex(got.SerialNumber)]
					mu.Unlock()
					if !ok {
						err = fmt.Errorf("listener presented serial %X, which was never written", got.SerialNumber)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range 20 {
		// Record the serial before the files hold it: a handshake may see
		// it as soon as Reload returns.
		dir := t.TempDir()
		cert, err := set.WriteServer(filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		issued[hex(cert.SerialNumber)] = true
		mu.Unlock()
		copyFile(t, filepath.Join(dir, "c.pem"), files.cfg.CertFile)
		copyFile(t, filepath.Join(dir, "k.pem"), files.cfg.KeyFile)
		if _, err := r.Reload(); err != nil {
			t.Error(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNewReloader(t *testing.T) {
	set := testcerts.New(t)
	tests := []struct {
		name    string
		server  bool
		cfg     tlsconfig.Config
		wantErr string
	}{
		{"server", true, set.Server(), ""},
		{"server not configured", true, tlsconfig.Config{}, "not configured"},
		{"server without key", true, tlsconfig.Config{CAFile: set.CAFile, CertFile: set.ServerCertFile}, "missing: key file"},
		{"server with a client certificate", true, set.Client(), set.ClientCertFile},
		{"client", false, set.Client(), ""},
		{"client with a server certificate", false, set.Server(), ""},
		{"client with a CA only", false, tlsconfig.Config{CAFile: set.CAFile}, ""},
		{"client without a CA", false, tlsconfig.Config{CertFile: set.ClientCertFile, KeyFile: set.ClientKeyFile}, "CA file is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newReloader := tlsconfig.NewClientReloader
			if tt.server {
				newReloader = tlsconfig.NewServerReloader
			}
			r, err := newReloader(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("%v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Config(); got != tt.cfg {
				t.Errorf("Config = %+v, want %+v", got, tt.cfg)
			}
			srv, cli := r.ServerTLS(), r.ClientTLS()
			if srv.MinVersion != tlsconfig.MinVersion || srv.ClientAuth != tls.RequireAndVerifyClientCert || srv.GetConfigForClient == nil {
				t.Errorf("listener: min version %x, client auth %v, per-handshake config %v", srv.MinVersion, srv.ClientAuth, srv.GetConfigForClient != nil)
			}
			if cli.MinVersion != tlsconfig.MinVersion || cli.ServerName != tlsconfig.ServerName || cli.VerifyConnection == nil || cli.GetClientCertificate == nil {
				t.Errorf("dialer: min version %x, server name %q, verifies %v, picks its certificate %v",
					cli.MinVersion, cli.ServerName, cli.VerifyConnection != nil, cli.GetClientCertificate != nil)
			}
		})
	}
}

// TestReloadClientWithoutCertificate: a caller with only a CA file presents
// nothing, so listeners refuse it, but it still verifies the server.
func TestReloadClientWithoutCertificate(t *testing.T) {
	set, foreign := testcerts.New(t), testcerts.New(t)
	r, err := tlsconfig.NewClientReloader(tlsconfig.Config{CAFile: set.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	if r.Certificate() != nil {
		t.Error("a reloader without a certificate file has a certificate")
	}
	relaxed := mustServerTLS(t, set.Server())
	relaxed.ClientAuth = tls.RequestClientCert
	if _, seen, err := handshake(t, serveTLS(t, relaxed), r.ClientTLS()); err != nil || seen != "none" {
		t.Errorf("to a listener that does not require a certificate: saw %q (%v), want none", seen, err)
	}
	if _, _, err := handshake(t, serveTLS(t, mustServerTLS(t, set.Server())), r.ClientTLS()); err == nil {
		t.Error("a listener that requires a certificate let in a caller without one")
	}
	foreignRelaxed := mustServerTLS(t, foreign.Server())
	foreignRelaxed.ClientAuth = tls.RequestClientCert
	_, _, err = handshake(t, serveTLS(t, foreignRelaxed), r.ClientTLS())
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("to a server of another CA: %v, want x509.UnknownAuthorityError", err)
	}
}

func mustServerTLS(t *testing.T, c tlsconfig.Config) *tls.Config {
	t.Helper()
	cfg, err := c.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustClientTLS(t *testing.T, c tlsconfig.Config) *tls.Config {
	t.Helper()
	cfg, err := c.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
