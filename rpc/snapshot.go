package rpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/grpc/metadata"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Snapshots saves backups of the state (server.Server).
type Snapshots interface {
	// SaveSnapshot writes a backup of this server's state to w.
	SaveSnapshot(ctx context.Context, w io.Writer) error
	// RestoreSnapshot replaces the cluster's state with the backup read
	// from r; only the leader can.
	RestoreSnapshot(ctx context.Context, r io.Reader) (*droverv1.SnapshotRestoreResponse, error)
}

// snapshotChunkSize is the size of the chunks a backup is streamed in.
const snapshotChunkSize = 256 << 10

// SnapshotSave streams a backup taken by the leader, or by this server
// with stale. A follower relays the leader's stream: streams do not go
// through the forwarder.
func (s *operatorService) SnapshotSave(req *droverv1.SnapshotSaveRequest, stream droverv1.OperatorService_SnapshotSaveServer) error {
	if s.snapshots == nil {
		return fmt.Errorf("this server takes no snapshots: %w", ErrUnavailable)
	}
	if !req.GetStale() {
		switch l := s.cluster.Leader(); {
		case l.ID == "" || (!l.Local && l.RPCAddr == ""):
			return fmt.Errorf("no leader known to take the snapshot (-stale takes it from this server): %w", ErrUnavailable)
		case !l.Local:
			return s.relaySnapshot(stream, l.RPCAddr, req)
		case !l.Ready:
			return fmt.Errorf("this server is leader but not ready yet: %w", ErrUnavailable)
		}
	}
	bw := bufio.NewWriterSize(chunkWriter(stream.Send), snapshotChunkSize)
	if err := s.snapshots.SaveSnapshot(stream.Context(), bw); err != nil {
		return err
	}
	return bw.Flush()
}

// relaySnapshot passes the leader's backup stream on to the caller, with
// the caller's token: the leader checks it again.
func (s *operatorService) relaySnapshot(stream droverv1.OperatorService_SnapshotSaveServer, addr string, req *droverv1.SnapshotSaveRequest) error {
	ctx, err := s.leaderContext(stream.Context())
	if err != nil {
		return err
	}
	conn, err := s.peerConn(addr)
	if err != nil {
		return fmt.Errorf("connect to the leader at %s: %v: %w", addr, err, ErrUnavailable)
	}
	from, err := droverv1.NewOperatorServiceClient(conn).SnapshotSave(ctx, req)
	if err != nil {
		return err
	}
	for {
		chunk, err := from.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(chunk); err != nil {
			return err
		}
	}
}

// leaderContext is the context of a stream relayed to the leader: one hop
// more, and the caller's token, which the leader checks again.
func (s *operatorService) leaderContext(in context.Context) (context.Context, error) {
	hops := incomingHops(in)
	if hops >= maxHops {
		return nil, fmt.Errorf("stream forwarded %d times without reaching the leader: %w", hops, ErrUnavailable)
	}
	ctx := metadata.AppendToOutgoingContext(in, hopsKey, strconv.Itoa(hops+1))
	if secret := tokenSecret(in); secret != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, TokenMetadataKey, secret)
	}
	return ctx, nil
}

// chunkWriter sends what is written as chunks of a stream.
type chunkWriter func(*droverv1.SnapshotChunk) error

func (send chunkWriter) Write(p []byte) (int, error) {
	// A copy: the caller reuses p, and gRPC does not promise to be done
	// with a message when Send returns.
	if err := send(&droverv1.SnapshotChunk{Data: bytes.Clone(p)}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// SnapshotRestore restores a backup on the leader. A follower relays the
// caller's stream to the leader.
func (s *operatorService) SnapshotRestore(stream droverv1.OperatorService_SnapshotRestoreServer) error {
	if s.snapshots == nil {
		return fmt.Errorf("this server restores no snapshots: %w", ErrUnavailable)
	}
	switch l := s.cluster.Leader(); {
	case l.ID == "" || (!l.Local && l.RPCAddr == ""):
		return fmt.Errorf("no leader known to restore the snapshot: %w", ErrUnavailable)
	case !l.Local:
		return s.relayRestore(stream, l.RPCAddr)
	}
	resp, err := s.snapshots.RestoreSnapshot(stream.Context(), &chunkReader{recv: stream.Recv})
	if err != nil {
		return err
	}
	return stream.SendAndClose(resp)
}

// relayRestore passes the caller's backup on to the leader, with the
// caller's token, and the leader's answer back.
func (s *operatorService) relayRestore(stream droverv1.OperatorService_SnapshotRestoreServer, addr string) error {
	ctx, err := s.leaderContext(stream.Context())
	if err != nil {
		return err
	}
	conn, err := s.peerConn(addr)
	if err != nil {
		return fmt.Errorf("connect to the leader at %s: %v: %w", addr, err, ErrUnavailable)
	}
	to, err := droverv1.NewOperatorServiceClient(conn).SnapshotRestore(ctx)
	if err != nil {
		return err
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := to.Send(chunk); err != nil {
			break // the leader's answer says why
		}
	}
	resp, err := to.CloseAndRecv()
	if err != nil {
		return err
	}
	return stream.SendAndClose(resp)
}

// chunkReader reads the data of a stream of chunks.
type chunkReader struct {
	recv func() (*droverv1.SnapshotChunk, error)
	buf  []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		chunk, err := c.recv()
		if err != nil {
			return 0, err
		}
		c.buf = chunk.GetData()
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}
