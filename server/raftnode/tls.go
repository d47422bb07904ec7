package raftnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// TLS is the mutual TLS of the raft transport. Only servers may speak raft,
// so Listen should refuse callers without a server certificate and Dial
// should accept only a server at the other end; raftnode does not check
// what the configurations say, it only uses them, once per connection, so
// configurations that pick their certificates per handshake
// (tlsconfig.Reloader) rotate them for raft's new connections too.
type TLS struct {
	// Listen secures accepted connections.
	Listen *tls.Config
	// Dial secures connections to other servers.
	Dial *tls.Config
}

// tlsStreamLayer is raft's stream layer over TLS on a listener we opened.
type tlsStreamLayer struct {
	net.Listener // the TCP listener; Accept wraps its connections
	advertise    net.Addr
	tls          TLS
	// handshakeTimeout bounds an accepted connection's handshake, so that a
	// caller that never completes one does not hold a goroutine for ever.
	handshakeTimeout time.Duration
}

func (l *tlsStreamLayer) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	// The handshake runs on the connection's first read, in raft's
	// goroutine for it, so that a slow caller never blocks the accept loop.
	return &acceptedConn{Conn: tls.Server(conn, l.tls.Listen), timeout: l.handshakeTimeout}, nil
}

// Dial connects to another server and completes the handshake within
// timeout.
func (l *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: l.tls.Dial}
	conn, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("raft TLS connection to %s: %w", address, err)
	}
	return conn, nil
}

func (l *tlsStreamLayer) Addr() net.Addr { return l.advertise }

// acceptedConn is a server-side TLS connection whose handshake is bounded in
// time.
type acceptedConn struct {
	*tls.Conn
	timeout time.Duration
	done    atomic.Bool
}

func (c *acceptedConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *acceptedConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// handshake completes the handshake once; tls.Conn serializes concurrent
// calls and returns at once when it is already complete.
func (c *acceptedConn) handshake() error {
	if c.done.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("raft TLS handshake with %s: %w", c.RemoteAddr(), err)
	}
	c.done.Store(true)
	return nil
}
