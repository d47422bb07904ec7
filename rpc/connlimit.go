package rpc

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// connLimit counts the connections open per remote address. Its
// listeners close a connection as soon as it is accepted when its address
// already has the most connections open, so that one client cannot take
// every descriptor and the memory behind them. IPv4-mapped IPv6 addresses
// count as their IPv4 address; connections without an IP (a Unix socket)
// are not limited.
//
// A wrapped connection is no *net.TCPConn, so gRPC does not set
// TCP_USER_TIMEOUT on it (as with TLS, where it cannot either): keepalive
// pings still find a vanished peer.
type connLimit struct {
	max    int
	logger *slog.Logger

	logRefusal rate.Sometimes
	open       atomic.Int64
	refused    atomic.Uint64

	mu    sync.Mutex
	perIP map[netip.Addr]int
}

func newConnLimit(max int, logger *slog.Logger) *connLimit {
	return &connLimit{max: max, logger: logger, logRefusal: rate.Sometimes{Interval: 10 * time.Second},
		perIP: make(map[netip.Addr]int)}
}

// listener wraps inner so that its connections count against the limit.
func (l *connLimit) listener(inner net.Listener) net.Listener {
	return &limitedListener{Listener: inner, limit: l}
}

// limitedListener accepts through a connLimit.
type limitedListener struct {
	net.Listener
	limit *connLimit
}

// Accept returns the next connection within the limit; those beyond it
// are closed and not returned.
func (ll *limitedListener) Accept() (net.Conn, error) {
	l := ll.limit
	for {
		conn, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, limited := remoteIP(conn)
		if limited && !l.take(ip) {
			l.refused.Add(1)
			_ = conn.Close()
			l.logRefusal.Do(func() {
				l.logger.Warn("closing connections beyond the limit per address", "remote", ip.String(), "limit", l.max,
					"refused_connections", l.refused.Load())
			})
			continue
		}
		l.open.Add(1)
		return &limitedConn{Conn: conn, l: l, ip: ip, limited: limited}, nil
	}
}

// take counts one more connection from ip if it is within the limit.
func (l *connLimit) take(ip netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perIP[ip] >= l.max {
		return false
	}
	l.perIP[ip]++
	return true
}

// release forgets a closed connection.
func (l *connLimit) release(ip netip.Addr, limited bool) {
	l.open.Add(-1)
	if !limited {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// remoteIP is the connection's remote IP, if it has one.
func remoteIP(conn net.Conn) (netip.Addr, bool) {
	addr := conn.RemoteAddr()
	if addr == nil {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// limitedConn gives its place back when it is closed, once however often
// it is closed.
type limitedConn struct {
	net.Conn
	l       *connLimit
	ip      netip.Addr
	limited bool
	closed  atomic.Bool
}

// Close closes the connection and releases its place.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.ip, c.limited)
	}
	return err
}
