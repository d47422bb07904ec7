package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/internal/backup"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// restoreIndexGap is how far past the end of the raft log a restored
// backup's index is placed. raft installs a restored snapshot at one past
// the larger of its last index and the snapshot's; asking for the log's end
// plus this gap makes that index known in advance (no leader appends this
// many entries while the restore is handed to raft), so the state can carry
// it from the start.
const restoreIndexGap = 1 << 16

// RestoreSnapshot replaces the whole state with a backup's, through raft:
// the leader installs it, and followers receive it as an installed
// snapshot. The backup is read to a file in the data dir and checked
// whole (archive checksums, then every record, as a restore would read it)
// before anything changes. The state's applied index and every table's
// index become the restore's raft index, past everything the cluster has
// answered, so no client sees an index go back and every blocking query
// wakes. Then the leader's duties (broker, blocked evaluations, heartbeat
// timers, deployment watcher, drainer) start again from the restored
// state.
func (s *Server) RestoreSnapshot(ctx context.Context, archive io.Reader) (*droverv1.SnapshotRestoreResponse, error) {
	if !s.leading() {
		return nil, fmt.Errorf("a restore runs on the leader, and this server does not lead: %w", rpc.ErrUnavailable)
	}
	if h := s.fsm.Halted(); h != nil {
		return nil, fmt.Errorf("refusing to restore on a halted server: %w: %w", h, rpc.ErrFailedPrecondition)
	}
	state, err := s.restoreFile("snapshot-restore-*.bin")
	if err != nil {
		return nil, err
	}
	defer closeAndRemove(state)
	bw := bufio.NewWriterSize(state, 1<<20)
	meta, err := backup.Read(archive, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot restore refused, nothing changed: %w: %w", err, rpc.ErrInvalidArgument)
	}
	if err := rewind(state); err != nil {
		return nil, err
	}
	if err := s.fsm.CheckSnapshot(state); err != nil {
		return nil, fmt.Errorf("snapshot restore refused, nothing changed: the backup of index %d does not restore: %w: %w", meta.Index, err, rpc.ErrInvalidArgument)
	}
	r := s.raft.Raft()
	gap := r.LastIndex() + restoreIndexGap
	index := gap + 1
	reindexed, err := s.restoreFile("snapshot-restore-*.reindexed")
	if err != nil {
		return nil, err
	}
	defer closeAndRemove(reindexed)
	if err := rewind(state); err != nil {
		return nil, err
	}
	bw = bufio.NewWriterSize(reindexed, 1<<20)
	if err := fsm.ReindexSnapshot(state, bw, index); err != nil {
		return nil, fmt.Errorf("snapshot restore: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("snapshot restore: %w", err)
	}
	size, err := reindexed.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	if err := rewind(reindexed); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.logger.Warn("restoring a backup: the whole state is replaced", "backup_index", meta.Index, "backup_cluster", meta.ClusterID, "index", index)
	rm := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: gap, Term: r.CurrentTerm(), Size: size}
	if err := r.Restore(rm, bufio.NewReaderSize(reindexed, 1<<20), 0); err != nil {
		return nil, fmt.Errorf("snapshot restore: %w", err)
	}
	// Writes may follow at once (servers announce themselves again), so
	// only an index below the state's is wrong.
	if got := r.LastIndex(); got < index {
		s.logger.Error("raft installed the restored backup below the index the state carries", "raft_index", got, "state_index", index)
	}
	done := make(chan struct{})
	select {
	case s.reassert <- done:
		<-done
	case <-s.shutdownCh:
		return nil, fmt.Errorf("snapshot restored at index %d, but the server is shutting down: %w", index, rpc.ErrUnavailable)
	}
	s.logger.Warn("backup restored; leader duties restarted from it", "index", index, "backup_index", meta.Index)
	return &droverv1.SnapshotRestoreResponse{Index: index, BackupIndex: meta.Index}, nil
}

func (s *Server) restoreFile(pattern string) (*os.File, error) {
	f, err := os.CreateTemp(s.dataDir, pattern)
	if err != nil {
		return nil, fmt.Errorf("snapshot restore: %w", err)
	}
	return f, nil
}

func closeAndRemove(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

func rewind(f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	return nil
}
