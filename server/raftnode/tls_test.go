package raftnode

import (
	"context"
	"net"
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
