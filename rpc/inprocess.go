package rpc

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/test/bufconn"
)

// HTTPPeerMetadataKey carries, on a call over the in-process connection,
// the address of the HTTP client the call is made for, so that the audit
// trail names it rather than the connection. It is believed only on that
// connection: a caller from the network cannot set it for itself.
const HTTPPeerMetadataKey = "drover-http-peer"

// peerAddr is the caller's address for the audit trail: the remote address
// of its connection, or, for the HTTP API's in-process calls, "http " and
// the HTTP client's address.
func peerAddr(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if _, inProcess := p.Addr.(inProcessAddr); !inProcess {
		return p.Addr.String()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(HTTPPeerMetadataKey); len(v) > 0 {
		return "http " + v[0]
	}
	return p.Addr.String()
}

// inProcessAddr names the in-process connections' peer: the HTTP API of
// the same server.
type inProcessAddr struct{}

func (inProcessAddr) Network() string { return "in-process" }
func (inProcessAddr) String() string  { return "in-process" }

// inProcessBuffer is the bytes each direction of an in-process connection
// holds before a writer waits for the reader: a whole answer of a list
// usually fits, so that neither side waits on the other frame by frame as
// with net.Pipe.
const inProcessBuffer = 1 << 20

// inProcessListener hands the server connections made in memory, so that
// the HTTP API reaches the gRPC services through the same interceptors as
// every other caller (admission, identity, ACLs, audit, forwarding) without
// a socket.
type inProcessListener struct {
	*bufconn.Listener
}

func newInProcessListener() *inProcessListener {
	return &inProcessListener{Listener: bufconn.Listen(inProcessBuffer)}
}

// Accept returns the server end of the next in-process connection.
func (l *inProcessListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, fmt.Errorf("accept in-process: %w", err)
	}
	return inProcessConn{Conn: c}, nil
}

// Addr is the in-process address.
func (l *inProcessListener) Addr() net.Addr { return inProcessAddr{} }

// dial makes a connection and hands its server end to Accept.
func (l *inProcessListener) dial(ctx context.Context, _ string) (net.Conn, error) {
	c, err := l.DialContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial in-process: %w", err)
	}
	return c, nil
}

// inProcessConn marks the server end of an in-process connection, for
// inProcessCreds.
type inProcessConn struct{ net.Conn }

func (inProcessConn) RemoteAddr() net.Addr { return inProcessAddr{} }
func (inProcessConn) LocalAddr() net.Addr  { return inProcessAddr{} }

// InProcessAuthInfo is the AuthInfo of a call that came in over the
// in-process connection. It carries no certificate, so such a call can
// never pass for a server: its caller is whoever its token says.
type InProcessAuthInfo struct {
	credentials.CommonAuthInfo
}

// AuthType names the in-process transport.
func (InProcessAuthInfo) AuthType() string { return "in-process" }

// inProcessCreds is the listener's TLS, except for in-process connections,
// which never leave the process: they skip the handshake and carry
// InProcessAuthInfo. grpc.Creds applies to every listener of a server,
// hence the wrapper.
type inProcessCreds struct {
	credentials.TransportCredentials
}

// ServerHandshake secures a connection from the network with TLS and
// passes an in-process one through.
func (c inProcessCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if _, ok := conn.(inProcessConn); ok {
		return conn, InProcessAuthInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	return c.TransportCredentials.ServerHandshake(conn)
}

// Clone keeps the wrapper around a clone.
func (c inProcessCreds) Clone() credentials.TransportCredentials {
	return inProcessCreds{TransportCredentials: c.TransportCredentials.Clone()}
}

// DialInProcess connects to this server through memory. Calls on the
// connection pass every interceptor, as calls from the network do; they
// carry no certificate, so only their token identifies them. Answers may
// be as large as the server sends. The caller closes the connection; Stop
// ends its calls.
func (s *Server) DialInProcess() (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("passthrough:///in-process",
		grpc.WithContextDialer(s.inProcess.dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(defaultMaxSendMsgSize), grpc.MaxCallSendMsgSize(s.maxRecvMsgSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("dial in-process: %w", err)
	}
	return conn, nil
}
