package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// peerCallTimeout bounds one call to another server while forming or
// joining a cluster, or probing its health.
const peerCallTimeout = 2 * time.Second

// peers holds one gRPC connection per other server, for the calls servers
// make to each other (Info and Join, and a rebuild's look at the cluster).
type peers struct {
	// creds secure the connections; with TLS they present this server's
	// certificate.
	creds credentials.TransportCredentials

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

func newPeers(creds credentials.TransportCredentials) *peers {
	return &peers{creds: creds, conns: make(map[string]*grpc.ClientConn)}
}

// cluster returns a ClusterService client for the server at addr.
func (p *peers) cluster(addr string) (droverv1.ClusterServiceClient, error) {
	conn, err := p.conn(addr)
	if err != nil {
		return nil, err
	}
	return droverv1.NewClusterServiceClient(conn), nil
}

// operator returns an OperatorService client for the server at addr.
func (p *peers) operator(addr string) (droverv1.OperatorServiceClient, error) {
	conn, err := p.conn(addr)
	if err != nil {
		return nil, err
	}
	return droverv1.NewOperatorServiceClient(conn), nil
}

// conn returns the pooled connection to the server at addr.
func (p *peers) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("call server at %s: %w: shutting down", addr, rpc.ErrUnavailable)
	}
	conn, ok := p.conns[addr]
	if !ok {
		var err error
		conn, err = grpc.NewClient(addr,
			grpc.WithTransportCredentials(p.creds),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rpc.Codec{})))
		if err != nil {
			return nil, fmt.Errorf("dial server at %s: %w", addr, err)
		}
		p.conns[addr] = conn
	}
	return conn, nil
}

// info asks the server at addr to describe itself.
func (p *peers) info(ctx context.Context, addr string) (*droverv1.ServerInfoResponse, error) {
	c, err := p.cluster(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
	defer cancel()
	resp, err := c.Info(ctx, &droverv1.ServerInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("server info from %s: %w", addr, err)
	}
	return resp, nil
}

// close closes every connection; later calls fail.
func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for addr, c := range p.conns {
		_ = c.Close()
		delete(p.conns, addr)
	}
}
