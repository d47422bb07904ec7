package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/internal/backup"
	"github.com/droverhq/drover/internal/version"
)

// SaveSnapshot writes a backup of this server's state to w: a consistent
// point-in-time copy (one state snapshot, at the index applied when it was
// taken) in the archive of internal/backup. The state is first written to
// a temporary file in the data dir, because the archive states its size
// before its bytes, and then streamed, so that its size never sits in
// memory.
func (s *Server) SaveSnapshot(ctx context.Context, w io.Writer) error {
	snap := s.state.Snapshot()
	index := snap.Index()
	tmp, err := os.CreateTemp(s.dataDir, "snapshot-save-*.tmp")
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	defer closeAndRemove(tmp)
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := fsm.WriteSnapshot(bw, snap, index); err != nil {
		return fmt.Errorf("snapshot save at index %d: %w", index, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("snapshot save at index %d: write %s: %w", index, tmp.Name(), err)
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	meta := backup.Meta{
		ClusterID: snap.ClusterMetadata().GetClusterId(),
		ServerID:  s.id,
		Version:   version.Version,
		Index:     index,
		Term:      s.raft.Raft().CurrentTerm(),
		Time:      time.Now().UTC(),
		StateSize: size,
	}
	if err := backup.Write(w, meta, bufio.NewReaderSize(tmp, 1<<20)); err != nil {
		return fmt.Errorf("snapshot save at index %d: %w", index, err)
	}
	s.logger.Info("snapshot saved", "index", index, "state_bytes", size)
	return nil
}
