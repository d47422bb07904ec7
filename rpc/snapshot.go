package rpc

import (
	"bufio"
	"bytes"
	"context"
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
	if incomingHops(stream.Context()) >= maxHops {
		return fmt.Errorf("snapshot save forwarded %d times without reaching the leader: %w", maxHops, ErrUnavailable)
	}
	conn, err := s.peerConn(addr)
	if err != nil {
		return fmt.Errorf("connect to the leader at %s: %v: %w", addr, err, ErrUnavailable)
	}
	ctx := metadata.AppendToOutgoingContext(stream.Context(), hopsKey, strconv.Itoa(incomingHops(stream.Context())+1))
	if secret := tokenSecret(stream.Context()); secret != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, TokenMetadataKey, secret)
	}
	from, err := droverv1.NewOperatorServiceClient(conn).SnapshotSave(ctx, req)
	if err != nil {
		return err
	}
	for {
		chunk, err := from.Recv()
		if err == io.EOF {
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
