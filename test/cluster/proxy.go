package cluster

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on loopback that a test puts in front of a server's
// port (with -raft-advertise, say) to stall the traffic through it. A stall
// is a network that stops delivering without closing anything: bytes sent
// meanwhile are held and delivered, in order, once it ends, so as long as
// the stall is shorter than the callers' I/O timeouts nobody sees an error,
// only delay. That is how a follower falls behind the leader while staying
// in the cluster.
type Proxy struct {
	listener net.Listener

	mu      sync.Mutex
	target  string
	ready   chan struct{} // closed once target is set
	stalled bool
	resume  chan struct{} // closed when a stall ends
	conns   map[net.Conn]struct{}
	closed  bool
}

// NewProxy listens on a free loopback port. Connections accepted before
// SetTarget wait for it. The proxy is closed when the test ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{listener: l, ready: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the address to reach the target through.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// SetTarget names the address connections are forwarded to. It may be
// called once.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
	close(p.ready)
}

// Stall stops delivering bytes in both directions until Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled = true
		p.resume = make(chan struct{})
	}
}

// Resume delivers what was held during the stall and carries on.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
}

// gate returns a channel that is closed while traffic may flow.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		return p.resume
	}
	open := make(chan struct{})
	close(open)
	return open
}

func (p *Proxy) accept() {
	for {
		c, err := p.listener.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	<-p.ready
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
	// One direction ended: end the other too, as a real peer would see.
	_ = client.Close()
	_ = server.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// track registers both ends, or closes them when the proxy is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, holding each chunk while the proxy is stalled.
func (p *Proxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// EOF, a reset or our own close: the peer sees it as the
			// connection ending, which is all a proxy can pass on.
			return
		}
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
	if p.target == "" {
		close(p.ready)
	}
	p.mu.Unlock()
	_ = p.listener.Close()
	for _, c := range conns {
		_ = c.Close()
	}
}
