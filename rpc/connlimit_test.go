package rpc

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestRemoteIP(t *testing.T) {
	tests := []struct {
		name    string
		addr    net.Addr
		want    string
		limited bool
	}{
		{"IPv4", &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5000}, "10.1.2.3", true},
		{"IPv4-mapped IPv6 counts as IPv4", &net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 5000}, "10.1.2.3", true},
		{"IPv6", &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 5000}, "2001:db8::1", true},
		{"Unix socket", &net.UnixAddr{Name: "/run/drover.sock", Net: "unix"}, "invalid IP", false},
		{"no address", nil, "invalid IP", false},
	}
	for _, tt := range tests {
		ip, limited := remoteIP(fakeConn{remote: tt.addr})
		if ip.String() != tt.want || limited != tt.limited {
			t.Errorf("%s: remoteIP = %s, %v; want %s, %v", tt.name, ip, limited, tt.want, tt.limited)
		}
	}
}

type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (c fakeConn) RemoteAddr() net.Addr { return c.remote }

// TestConnLimitPerAddress serves an echo through a listener limited to two
// connections per address: two connections from 127.0.0.1 work, a third is
// closed at once, one from 127.0.0.2 works, and closing one of the first
// two makes room for another.
func TestConnLimitPerAddress(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limit := newConnLimit(2, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l := limit.listener(inner)
	t.Cleanup(func() { _ = l.Close() })
	// Each accepted connection echoes until its client closes; served
	// reports the end of each.
	served := make(chan struct{}, 16)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(conn, conn)
				_ = conn.Close()
				served <- struct{}{}
			}()
		}
	}()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
		conn, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatalf("dial from %s: %v", from, err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		return conn
	}
	echoes := func(conn net.Conn) error {
		if _, err := conn.Write([]byte("x")); err != nil {
			return err
		}
		buf := make([]byte, 1)
		_, err := io.ReadFull(conn, buf)
		return err
	}

	c1, c2 := dial("127.0.0.1"), dial("127.0.0.1")
	for i, c := range []net.Conn{c1, c2} {
		if err := echoes(c); err != nil {
			t.Fatalf("connection %d within the limit: %v", i+1, err)
		}
	}
	c3 := dial("127.0.0.1")
	// Closed by the server: EOF or a reset, not an echo nor the deadline.
	var netErr net.Error
	if err := echoes(c3); err == nil || errors.As(err, &netErr) && netErr.Timeout() {
		t.Fatalf("third connection from 127.0.0.1: echo returned %v, want it closed", err)
	}
	if err := echoes(dial("127.0.0.2")); err != nil {
		t.Fatalf("connection from another address: %v", err)
	}
	if got := limit.refused.Load(); got != 1 {
		t.Errorf("%d connections refused, want 1", got)
	}

	_ = c1.Close()
	<-served
	if err := echoes(dial("127.0.0.1")); err != nil {
		t.Fatalf("connection after one closed: %v", err)
	}
	if got := limit.open.Load(); got != 3 {
		t.Errorf("%d connections open, want 3 (two from 127.0.0.1, one from 127.0.0.2)", got)
	}
	limit.mu.Lock()
	defer limit.mu.Unlock()
	if n := limit.perIP[netip.MustParseAddr("127.0.0.1")]; n != 2 {
		t.Errorf("127.0.0.1 holds %d connections, want 2", n)
	}
}
