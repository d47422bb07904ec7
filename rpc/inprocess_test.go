package rpc

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/droverhq/drover/internal/tlsconfig"
)

// recordingCreds stands in for the listener's TLS: it records handshakes.
type recordingCreds struct {
	credentials.TransportCredentials
	handshakes *int
}

func (c recordingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	*c.handshakes++
	return conn, credentials.TLSInfo{}, nil
}

func (c recordingCreds) Clone() credentials.TransportCredentials { return c }

// TestInProcessCredsSkipTLSAndCarryNoCertificate checks that a connection
// from the in-process listener skips the TLS handshake and can never pass
// for a server, while one from the network still goes through TLS.
func TestInProcessCredsSkipTLSAndCarryNoCertificate(t *testing.T) {
	handshakes := 0
	creds := inProcessCreds{TransportCredentials: recordingCreds{handshakes: &handshakes}}

	l := newInProcessListener()
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	client, err := l.dial(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	if server == nil {
		t.Fatal("no connection accepted")
	}
	defer server.Close()

	_, info, err := creds.ServerHandshake(server)
	if err != nil {
		t.Fatal(err)
	}
	if handshakes != 0 {
		t.Fatalf("in-process connection went through TLS")
	}
	if _, ok := info.(InProcessAuthInfo); !ok {
		t.Fatalf("auth info %T, want InProcessAuthInfo", info)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: server.RemoteAddr(), AuthInfo: info})
	if err := tlsconfig.RequireServerPeer(ctx); !errors.Is(err, tlsconfig.ErrNotServer) {
		t.Fatalf("in-process caller passed for a server: %v", err)
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, _, err := creds.ServerHandshake(a); err != nil {
		t.Fatal(err)
	}
	if handshakes != 1 {
		t.Fatalf("network connection skipped TLS")
	}
	if _, ok := creds.Clone().(inProcessCreds); !ok {
		t.Fatal("Clone dropped the in-process wrapper")
	}
}

// TestInProcessListenerClose checks that Close ends Accept and dials.
func TestInProcessListenerClose(t *testing.T) {
	l := newInProcessListener()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); err == nil {
		t.Fatalf("Accept after Close succeeded")
	}
	if _, err := l.dial(t.Context(), ""); err == nil {
		t.Fatalf("dial after Close succeeded")
	}
}

// TestPeerAddr checks that the HTTP client's address is believed only on
// the in-process connection.
func TestPeerAddr(t *testing.T) {
	tcp := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 4000}
	withMD := func(ctx context.Context) context.Context {
		return metadata.NewIncomingContext(ctx, metadata.Pairs(HTTPPeerMetadataKey, "192.0.2.7:5555"))
	}
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"no peer", context.Background(), ""},
		{"network", peer.NewContext(context.Background(), &peer.Peer{Addr: tcp}), "10.0.0.1:4000"},
		{"network claiming HTTP", withMD(peer.NewContext(context.Background(), &peer.Peer{Addr: tcp})), "10.0.0.1:4000"},
		{"in-process", peer.NewContext(context.Background(), &peer.Peer{Addr: inProcessAddr{}}), "in-process"},
		{"in-process for HTTP", withMD(peer.NewContext(context.Background(), &peer.Peer{Addr: inProcessAddr{}})), "http 192.0.2.7:5555"},
	}
	for _, tt := range tests {
		if got := peerAddr(tt.ctx); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
