package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Snapshot layout: the magic bytes, a varint-length SnapshotHeader, then
// records, each a record-type byte, a varint length and a message. Records
// come table by table: the index table, nodes, job versions, jobs,
// evaluations, allocations (allocations refer to nodes and job versions),
// servers, job request results, the release history of allocation
// addresses.
var snapshotMagic = []byte("DROVERSNAP")

// snapshotFormatVersion is written in every header. Restore refuses other
// versions rather than misread them.
const snapshotFormatVersion = 1

// maxRecordSize bounds one record, so that a corrupt length cannot make
// Restore allocate without limit.
const maxRecordSize = 64 << 20

// recordType says which table a snapshot record belongs to.
type recordType byte

const (
	recordTableIndex recordType = 1
	recordNode       recordType = 2
	recordJobVersion recordType = 3
	recordJob        recordType = 4
	recordEval       recordType = 5
	recordAlloc      recordType = 6
	recordServer     recordType = 7
	recordJobRequest recordType = 8

	// Record types from recordSkippable up carry history a server can do
	// without: a reader that does not know one skips it (as raft entries
	// with the ignore-if-unknown flag are skipped), so a snapshot made by a
	// newer server still restores.
	recordSkippable recordType = 128
	// recordIPReleases is one block's address release history. Without it
	// addresses are still never handed out twice; only the order in which
	// free ones are reused is lost.
	recordIPReleases recordType = 128
)

// Snapshot captures the current state for raft. It is cheap: the state
// snapshot is an immutable view, written out later by Persist.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{snap: f.state.Snapshot(), index: f.state.LatestIndex()}, nil
}

type fsmSnapshot struct {
	snap  *state.Snapshot
	index uint64
}

// Persist writes the snapshot to sink. raft may run it concurrently with
// Apply.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 1<<20)
	if err := WriteSnapshot(w, s.snap, s.index); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot at index %d: %w", s.index, err)
	}
	if err := w.Flush(); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot at index %d: %w", s.index, err)
	}
	return sink.Close()
}

// Release is a no-op: the state snapshot holds no resources.
func (s *fsmSnapshot) Release() {}

// WriteSnapshot writes every table of snap to w, with a header naming index
// as the last applied raft index.
func WriteSnapshot(w io.Writer, snap *state.Snapshot, index uint64) error {
	rw := &recordWriter{w: w}
	rw.raw(snapshotMagic)
	rw.message(0, &droverv1.SnapshotHeader{FormatVersion: snapshotFormatVersion, LastIndex: index}, false)
	for table, idx := range snap.TableIndexes() {
		rw.message(recordTableIndex, &droverv1.TableIndex{Table: table, Index: idx}, true)
	}
	for n := range snap.Nodes() {
		rw.message(recordNode, n, true)
	}
	for j := range snap.AllJobVersions() {
		rw.message(recordJobVersion, j, true)
	}
	for j := range snap.Jobs() {
		rw.message(recordJob, j, true)
	}
	for e := range snap.Evals() {
		rw.message(recordEval, e, true)
	}
	for a := range snap.Allocs() {
		rw.message(recordAlloc, a, true)
	}
	for m := range snap.Servers() {
		rw.message(recordServer, m, true)
	}
	for r := range snap.JobRequestResults() {
		rw.message(recordJobRequest, r, true)
	}
	for b := range snap.IPBlockReleases() {
		rw.message(recordIPReleases, b, true)
	}
	return rw.err
}

// recordWriter writes snapshot records, keeping the first error.
type recordWriter struct {
	w   io.Writer
	err error
	buf []byte
}

func (rw *recordWriter) raw(b []byte) {
	if rw.err == nil {
		_, rw.err = rw.w.Write(b)
	}
}

func (rw *recordWriter) message(t recordType, m vtMessage, typed bool) {
	if rw.err != nil {
		return
	}
	size := m.SizeVT()
	rw.buf = rw.buf[:0]
	if typed {
		rw.buf = append(rw.buf, byte(t))
	}
	rw.buf = binary.AppendUvarint(rw.buf, uint64(size))
	start := len(rw.buf)
	rw.buf = append(rw.buf, make([]byte, size)...)
	if _, err := m.MarshalToSizedBufferVT(rw.buf[start:]); err != nil {
		rw.err = fmt.Errorf("encode %T: %w", m, err)
		return
	}
	rw.raw(rw.buf)
}

// Restore replaces the whole state with a snapshot's. The new state is
// built aside and swapped in at once; on error the old state stays. Event
// subscribers are ended, since the changes in between are not events.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	r, err := f.state.Restore()
	if err != nil {
		return err
	}
	index, err := readSnapshot(bufio.NewReaderSize(rc, 1<<20), r)
	if err != nil {
		r.Abort()
		return fmt.Errorf("restore snapshot: %w", err)
	}
	r.Commit(index)
	f.events.Purge()
	f.logger.Info("restored state from snapshot", "index", index)
	return nil
}

// readSnapshot feeds every record to the restorer and returns the
// snapshot's last applied index.
func readSnapshot(r *bufio.Reader, rs *state.Restorer) (uint64, error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil || !bytes.Equal(magic, snapshotMagic) {
		return 0, errors.New("not a drover snapshot (bad magic)")
	}
	var header droverv1.SnapshotHeader
	if err := readMessage(r, &header); err != nil {
		return 0, fmt.Errorf("header: %w", err)
	}
	if header.GetFormatVersion() != snapshotFormatVersion {
		return 0, fmt.Errorf("snapshot format version %d is not supported (this server reads %d)",
			header.GetFormatVersion(), snapshotFormatVersion)
	}
	for n := 0; ; n++ {
		t, err := r.ReadByte()
		if errors.Is(err, io.EOF) {
			return header.GetLastIndex(), nil
		}
		if err != nil {
			return 0, err
		}
		if err := restoreRecord(r, recordType(t), rs); err != nil {
			return 0, fmt.Errorf("record %d (type %d): %w", n, t, err)
		}
	}
}

func restoreRecord(r *bufio.Reader, t recordType, rs *state.Restorer) error {
	switch t {
	case recordTableIndex:
		var m droverv1.TableIndex
		if err := readMessage(r, &m); err != nil {
			return err
		}
		return rs.TableIndex(m.GetTable(), m.GetIndex())
	case recordNode:
		return restoreAs(r, &droverv1.Node{}, rs.Node)
	case recordJobVersion:
		return restoreAs(r, &droverv1.Job{}, rs.JobVersion)
	case recordJob:
		return restoreAs(r, &droverv1.Job{}, rs.Job)
	case recordEval:
		return restoreAs(r, &droverv1.Evaluation{}, rs.Eval)
	case recordAlloc:
		return restoreAs(r, &droverv1.Allocation{}, rs.Alloc)
	case recordServer:
		return restoreAs(r, &droverv1.ServerMember{}, rs.Server)
	case recordJobRequest:
		return restoreAs(r, &droverv1.JobRequestResult{}, rs.JobRequestResult)
	case recordIPReleases:
		return restoreAs(r, &droverv1.IPBlockReleases{}, rs.IPBlockReleases)
	}
	if t >= recordSkippable {
		return skipRecord(r)
	}
	return fmt.Errorf("unknown snapshot record type %d", t)
}

func restoreAs[M vtMessage](r *bufio.Reader, m M, restore func(M) error) error {
	if err := readMessage(r, m); err != nil {
		return err
	}
	return restore(m)
}

// skipRecord reads past a record this server does not know.
func skipRecord(r *bufio.Reader) error {
	size, err := binary.ReadUvarint(r)
	if err != nil {
		return fmt.Errorf("record length: %w", err)
	}
	if size > maxRecordSize {
		return fmt.Errorf("record of %d bytes exceeds the %d byte limit", size, maxRecordSize)
	}
	if _, err := r.Discard(int(size)); err != nil {
		return fmt.Errorf("record body: %w", err)
	}
	return nil
}

func readMessage(r *bufio.Reader, m vtMessage) error {
	size, err := binary.ReadUvarint(r)
	if err != nil {
		return fmt.Errorf("record length: %w", err)
	}
	if size > maxRecordSize {
		return fmt.Errorf("record of %d bytes exceeds the %d byte limit", size, maxRecordSize)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("record body: %w", err)
	}
	return m.UnmarshalVT(buf)
}
