package simagent

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"

	"github.com/droverhq/drover/rpc"
)

// pool holds the fleet's connections: a few per server address, shared by
// every agent. The address list only grows: addresses the servers announce
// are added, none is dropped, so an agent's position in it stays valid.
type pool struct {
	dial      []grpc.DialOption
	perServer int

	mu     sync.RWMutex
	addrs  []string
	conns  map[string][]*grpc.ClientConn
	closed bool
}

func newPool(addrs []string, perServer int, opts []grpc.DialOption) (*pool, error) {
	p := &pool{
		dial:      append(defaultDialOptions(), opts...),
		perServer: perServer,
		conns:     make(map[string][]*grpc.ClientConn),
	}
	for _, a := range addrs {
		if err := p.add(a); err != nil {
			return nil, errors.Join(err, p.close())
		}
	}
	return p, nil
}

// defaultDialOptions: those of every drover client (plaintext), quick
// reconnection to a server that comes back, and keepalives that notice a
// server gone silent (within the servers' enforcement policy of at least
// 10s).
func defaultDialOptions() []grpc.DialOption {
	return append(rpc.ClientDialOptions(nil),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)
}

// add dials addr unless it is known. The caller holds mu or owns p.
func (p *pool) add(addr string) error {
	if _, ok := p.conns[addr]; ok || addr == "" {
		return nil
	}
	conns := make([]*grpc.ClientConn, p.perServer)
	for i := range conns {
		c, err := grpc.NewClient(addr, p.dial...)
		if err != nil {
			for _, d := range conns[:i] {
				_ = d.Close()
			}
			return fmt.Errorf("simagent: dial server %s: %w", addr, err)
		}
		conns[i] = c
	}
	p.conns[addr] = conns
	p.addrs = append(p.addrs, addr)
	return nil
}

// conn returns connection k of server i, both taken modulo what there is,
// and the server's address.
func (p *pool) conn(i uint32, k int) (string, *grpc.ClientConn) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	addr := p.addrs[int(i%uint32(len(p.addrs)))]
	conns := p.conns[addr]
	return addr, conns[k%len(conns)]
}

// learn adds the addresses a server announced. Answers nearly always name
// known servers, so the check takes only the read lock.
func (p *pool) learn(addrs []string) {
	p.mu.RLock()
	known := true
	for _, a := range addrs {
		if _, ok := p.conns[a]; !ok {
			known = false
			break
		}
	}
	p.mu.RUnlock()
	if known {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for _, a := range addrs {
		// A bad address is not the agents' problem: they keep the others.
		_ = p.add(a)
	}
}

// servers returns the known addresses.
func (p *pool) servers() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.addrs)
}

// close closes every connection.
func (p *pool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, conns := range p.conns {
		for _, c := range conns {
			if c != nil {
				errs = append(errs, c.Close())
			}
		}
	}
	return errors.Join(errs...)
}
