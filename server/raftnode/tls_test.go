package raftnode

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
)

// raftTLS is the raft TLS a server with identity cfg uses.
func raftTLS(t *testing.T, cfg tlsconfig.Config) *TLS {
	t.Helper()
	listen, err := cfg.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	dial, err := cfg.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return &TLS{Listen: tlsconfig.OnlyServers(listen), Dial: dial}
}

// TestTLSTransportReplicates adds a second server to a bootstrapped one over
// TLS and waits until it has every entry.
func TestTLSTransportReplicates(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	cfg1 := testConfig(t, t.TempDir(), &testFSM{})
	cfg1.TLS = raftTLS(t, certs.Server())
	n1 := startNode(t, cfg1)
	waitLeader(t, n1)

	fsm2 := &testFSM{}
	cfg2 := testConfig(t, t.TempDir(), fsm2)
	cfg2.ServerID, cfg2.Bootstrap, cfg2.TLS = "server-2", false, raftTLS(t, certs.Server())
	n2 := startNode(t, cfg2)
	if err := n1.Raft().AddVoter("server-2", n2.Addr(), 0, 5*time.Second).Error(); err != nil {
		t.Fatalf("AddVoter: %v", err)
	}
	want := []string{"a", "b", "c"}
	apply(t, n1, want...)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		if got, _, _ := fsm2.state(); slices.Equal(got, want) {
			return
		}
		select {
		case <-ctx.Done():
			got, _, _ := fsm2.state()
			t.Fatalf("second server has %v, want %v", got, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestTLSTransportRefusesClients: a caller with a certificate the CA signed
// but no server identity, or with none at all, cannot speak raft; a server
// can.
func TestTLSTransportRefusesClients(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	cfg := testConfig(t, t.TempDir(), &testFSM{})
	cfg.TLS = raftTLS(t, certs.Server())
	n := startNode(t, cfg)
	waitLeader(t, n)

	tests := []struct {
		name   string
		caller tlsconfig.Config
		want   bool
	}{
		{"server certificate", certs.Server(), true},
		{"client certificate", certs.Client(), false},
		{"no certificate", tlsconfig.Config{CAFile: certs.CAFile}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cliCfg, err := tt.caller.ClientTLS()
			if err != nil {
				t.Fatal(err)
			}
			err = testcerts.Probe(string(n.Addr()), cliCfg, 300*time.Millisecond)
			if got := err == nil; got != tt.want {
				t.Fatalf("accepted = %v (%v), want %v", got, err, tt.want)
			}
		})
	}
	t.Run("plaintext", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", string(n.Addr()), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		// Bytes of a raft command: the server reads them as a TLS record
		// and hangs up.
		if _, err := conn.Write([]byte{0, 0x81, 0xa1, 'T', 'e', 'r', 'm'}); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Read(make([]byte, 64)); err == nil {
			t.Error("the server answered a plaintext caller")
		}
	})
}

// probe connects to a raft listener and reports whether the server kept
// the connection: a refused caller's first read fails at once, an accepted
// one's times out waiting for raft to say something.

// reloadingTLS is the raft TLS a server builds from a tlsconfig.Reloader.
func reloadingTLS(r *tlsconfig.Reloader) *TLS {
	return &TLS{Listen: tlsconfig.OnlyServers(r.ServerTLS()), Dial: r.ClientTLS()}
}

// TestTLSTransportRotatesCA takes a running server through a rotation to a
// new CA without restarting it (CA bundle, new certificate, old CA
// dropped), then adds a server that knows only the new CA: the running
// server's new connections, both ways, use the rotated material. A server
// certificate of the old CA is then refused.
func TestTLSTransportRotatesCA(t *testing.T) {
	t.Parallel()
	oldCA, newCA := testcerts.New(t), testcerts.New(t)
	dir := t.TempDir()
	files := tlsconfig.Config{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem")}
	if err := testcerts.WriteBundle(files.CAFile, oldCA.CAFile); err != nil {
		t.Fatal(err)
	}
	if _, err := oldCA.WriteServer(files.CertFile, files.KeyFile); err != nil {
		t.Fatal(err)
	}
	r1, err := tlsconfig.NewServerReloader(files)
	if err != nil {
		t.Fatal(err)
	}
	cfg1 := testConfig(t, t.TempDir(), &testFSM{})
	cfg1.TLS = reloadingTLS(r1)
	n1 := startNode(t, cfg1)
	waitLeader(t, n1)

	steps := []func() error{
		func() error { return testcerts.WriteBundle(files.CAFile, oldCA.CAFile, newCA.CAFile) },
		func() error { _, err := newCA.WriteServer(files.CertFile, files.KeyFile); return err },
		func() error { return testcerts.WriteBundle(files.CAFile, newCA.CAFile) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		changed, err := r1.Reload()
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		t.Logf("step %d: %s", i+1, changed)
	}

	r2, err := tlsconfig.NewServerReloader(newCA.Server())
	if err != nil {
		t.Fatal(err)
	}
	fsm2 := &testFSM{}
	cfg2 := testConfig(t, t.TempDir(), fsm2)
	cfg2.ServerID, cfg2.Bootstrap, cfg2.TLS = "server-2", false, reloadingTLS(r2)
	n2 := startNode(t, cfg2)
	if err := n1.Raft().AddVoter("server-2", n2.Addr(), 0, 5*time.Second).Error(); err != nil {
		t.Fatalf("AddVoter: %v", err)
	}
	want := []string{"a", "b"}
	apply(t, n1, want...)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		if got, _, _ := fsm2.state(); slices.Equal(got, want) {
			break
		}
		select {
		case <-ctx.Done():
			got, _, _ := fsm2.state()
			t.Fatalf("second server has %v, want %v", got, want)
		case <-time.After(10 * time.Millisecond):
		}
	}

	// Both callers trust the new CA: only what they present differs.
	for name, caller := range map[string]tlsconfig.Config{
		"old CA": {CAFile: newCA.CAFile, CertFile: oldCA.ServerCertFile, KeyFile: oldCA.ServerKeyFile},
		"new CA": newCA.Server(),
	} {
		cliCfg, err := caller.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		err = testcerts.Probe(string(n1.Addr()), cliCfg, 300*time.Millisecond)
		if got, want := err == nil, name == "new CA"; got != want {
			t.Errorf("server certificate of the %s: accepted = %v (%v), want %v", name, got, err, want)
		}
	}
}
