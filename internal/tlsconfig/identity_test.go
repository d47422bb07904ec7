package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
)

// handshakeTimeout bounds one test connection.
const handshakeTimeout = 10 * time.Second

func TestHandshake(t *testing.T) {
	set := testcerts.New(t)
	foreign := testcerts.New(t) // another CA
	tests := []struct {
		name        string
		listener    tlsconfig.Config
		onlyServers bool
		dialer      tlsconfig.Config
		want        bool
	}{
		{"server calls server", set.Server(), false, set.Server(), true},
		{"client calls server", set.Server(), false, set.Client(), true},
		{"server calls raft listener", set.Server(), true, set.Server(), true},
		{"client calls raft listener", set.Server(), true, set.Client(), false},
		{"caller without certificate", set.Server(), false, tlsconfig.Config{CAFile: set.CAFile}, false},
		{"caller of another CA", set.Server(), false, tlsconfig.Config{CAFile: set.CAFile, CertFile: foreign.ClientCertFile, KeyFile: foreign.ClientKeyFile}, false},
		{"server of another CA", foreign.Server(), false, set.Client(), false},
		{"listener with a client certificate", set.Client(), false, set.Server(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srvCfg, err := tt.listener.ServerTLS()
			if err != nil {
				t.Fatal(err)
			}
			if tt.onlyServers {
				srvCfg = tlsconfig.OnlyServers(srvCfg)
			}
			cliCfg, err := tt.dialer.ClientTLS()
			if err != nil {
				t.Fatal(err)
			}
			version, err := exchange(t, srvCfg, cliCfg)
			t.Logf("outcome: %v", err)
			if got := err == nil; got != tt.want {
				t.Fatalf("connected = %v (%v), want %v", got, err, tt.want)
			}
			if err == nil && version != tls.VersionTLS13 {
				t.Errorf("negotiated version %x, want TLS 1.3", version)
			}
		})
	}
}

// exchange connects a client with cliCfg to a listener with srvCfg over
// loopback. The server sends one byte after its handshake succeeds, so that
// a refusal the server decides after the client's TLS 1.3 handshake has
// completed still shows. It returns the negotiated version.
func exchange(t *testing.T, srvCfg, cliCfg *tls.Config) (uint16, error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
		if err := conn.(*tls.Conn).Handshake(); err != nil {
			served <- err
			return
		}
		_, err = conn.Write([]byte{1})
		served <- err
	}()
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: handshakeTimeout}, Config: cliCfg}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	conn, dialErr := dialer.DialContext(ctx, "tcp", ln.Addr().String())
	var version uint16
	if dialErr == nil {
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
		version = conn.(*tls.Conn).ConnectionState().Version
		_, dialErr = conn.Read(make([]byte, 1))
	} else {
		_ = ln.Close() // the server may still wait in Accept on a failed dial
	}
	if err := <-served; err != nil && dialErr == nil {
		return version, err
	}
	return version, dialErr
}

func TestIsServer(t *testing.T) {
	set := testcerts.New(t)
	upper := readCert(t, set.ServerCertFile)
	upper.DNSNames = []string{"SERVER.DROVER"}
	tests := []struct {
		name string
		cert *x509.Certificate
		want bool
	}{
		{"server certificate", readCert(t, set.ServerCertFile), true},
		{"client certificate", readCert(t, set.ClientCertFile), false},
		{"no certificate", nil, false},
		{"server SAN in capitals", upper, true},
		{"server name only as common name", &x509.Certificate{}, false},
	}
	for _, tt := range tests {
		if got := tlsconfig.IsServer(tt.cert); got != tt.want {
			t.Errorf("%s: IsServer = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRequireServerPeer(t *testing.T) {
	set := testcerts.New(t)
	server, client := readCert(t, set.ServerCertFile), readCert(t, set.ClientCertFile)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	withPeer := func(auth credentials.AuthInfo) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: addr, AuthInfo: auth})
	}
	verified := func(c *x509.Certificate) credentials.TLSInfo {
		return credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}}
	}
	tests := []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"no peer", context.Background(), false},
		{"plaintext", withPeer(nil), false},
		{"client certificate", withPeer(verified(client)), false},
		{"server certificate", withPeer(verified(server)), true},
		{"server certificate not verified", withPeer(credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{server}}}), false},
	}
	for _, tt := range tests {
		err := tlsconfig.RequireServerPeer(tt.ctx)
		if got := err == nil; got != tt.want {
			t.Errorf("%s: RequireServerPeer = %v, want success %v", tt.name, err, tt.want)
		}
		if err != nil && !errors.Is(err, tlsconfig.ErrNotServer) {
			t.Errorf("%s: %v does not wrap ErrNotServer", tt.name, err)
		}
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
