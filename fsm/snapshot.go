package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Snapshot layout: the magic bytes, a varint-length SnapshotHeader (which
// also carries the cluster metadata and the release history of allocation
// addresses), then records, each a record-type
// byte, a varint length and a message. Records
// come table by table: the index table, nodes, job versions, jobs,
// evaluations, allocations (allocations refer to nodes and job versions),
// servers, job request results.
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
	recordDeployment recordType = 9
	// ACL records appear only once ACL entries (0.3.0, gated) were
	// applied, so every server restoring them knows them.
	recordACLPolicy    recordType = 10
	recordACLToken     recordType = 11
	recordACLBootstrap recordType = 12
)

// Snapshot captures the current state for raft. It is cheap: the state
// snapshot is an immutable view, written out later by Persist.
//
// A halted FSM refuses: its state lacks the entry it could not apply, while
// raft counts that entry and the later ones as applied, so a snapshot would
// drop them from every log compacted behind it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if h := f.Halted(); h != nil {
		return nil, fmt.Errorf("refusing to snapshot: %w", h)
	}
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
	header := &droverv1.SnapshotHeader{FormatVersion: snapshotFormatVersion, LastIndex: index, ClusterMetadata: snap.ClusterMetadata()}
	header.IpReleases = slices.Collect(snap.IPBlockReleases())
	if header.SizeVT() > maxRecordSize {
		// No server could read it back. Without the history, addresses are
		// still never handed out twice; only their reuse order is lost.
		header.IpReleases = nil
	}
	rw.message(0, header, false)
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
	for d := range snap.Deployments() {
		rw.message(recordDeployment, d, true)
	}
	for p := range snap.ACLPolicies() {
		rw.message(recordACLPolicy, p, true)
	}
	for t := range snap.ACLTokens() {
		rw.message(recordACLToken, t, true)
	}
	if b := snap.ACLBootstrap(); b != nil {
		rw.message(recordACLBootstrap, b, true)
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

// rawRecord writes an encoded record of type t as it is.
func (rw *recordWriter) rawRecord(t recordType, rec []byte) {
	if rw.err != nil {
		return
	}
	rw.buf = append(rw.buf[:0], byte(t))
	rw.buf = binary.AppendUvarint(rw.buf, uint64(len(rec)))
	rw.buf = append(rw.buf, rec...)
	rw.raw(rw.buf)
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
//
// The header's cluster metadata is restored only if this release knows the
// cluster metadata entry type, as a server of an older release would skip
// it. A halted FSM refuses to restore: it stays halted either way.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if h := f.Halted(); h != nil {
		return fmt.Errorf("refusing to restore a snapshot: %w", h)
	}
	r, err := f.state.Restore()
	if err != nil {
		return err
	}
	sr := &snapshotReader{f: f, r: bufio.NewReaderSize(rc, 1<<20), rs: r}
	header, err := sr.read()
	if err == nil {
		err = f.restoreClusterMetadata(r, header)
	}
	for _, b := range header.GetIpReleases() {
		if err != nil {
			break
		}
		err = r.IPBlockReleases(b)
	}
	if err != nil {
		r.Abort()
		return fmt.Errorf("restore snapshot: %w", err)
	}
	index := header.GetLastIndex()
	r.Commit(index)
	f.events.Purge()
	if sr.repaired > 0 {
		f.logger.Warn("repaired snapshot records holding invalid UTF-8 or malformed unknown fields, written by an older server",
			"index", index, "records", sr.repaired)
	}
	if sr.upgraded > 0 {
		f.logger.Info("upgraded snapshot records holding nanosecond durations, written by a release before 0.3",
			"index", index, "records", sr.upgraded)
	}
	f.logger.Info("restored state from snapshot", "index", index)
	return nil
}

// restoreClusterMetadata restores the metadata of the snapshot's header,
// if this release knows it.
func (f *FSM) restoreClusterMetadata(r *state.Restorer, header *droverv1.SnapshotHeader) error {
	m := header.GetClusterMetadata()
	switch {
	case m == nil:
		return nil
	case !f.knows(droverv1.MessageTypeClusterMetadata):
		f.logger.Warn("skipping the snapshot's cluster metadata, unknown to this server's release", "version", f.release.Version)
		return nil
	}
	return r.ClusterMetadata(m)
}

// snapshotReader feeds a snapshot's records to a restorer, repairing those
// that are not portable (see makePortable).
type snapshotReader struct {
	f  *FSM
	r  *bufio.Reader
	rs *state.Restorer
	// repaired counts the records repaired; upgraded those holding
	// durations in the nanosecond fields of releases before 0.3.
	repaired int
	upgraded int
}

// read feeds every record to the restorer and returns the snapshot's
// header.
func (sr *snapshotReader) read() (*droverv1.SnapshotHeader, error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(sr.r, magic); err != nil || !bytes.Equal(magic, snapshotMagic) {
		return nil, errors.New("not a drover snapshot (bad magic)")
	}
	header := &droverv1.SnapshotHeader{}
	if err := sr.message(header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if header.GetFormatVersion() != snapshotFormatVersion {
		return nil, fmt.Errorf("snapshot format version %d is not supported (this server reads %d)",
			header.GetFormatVersion(), snapshotFormatVersion)
	}
	for n := 0; ; n++ {
		t, err := sr.r.ReadByte()
		if errors.Is(err, io.EOF) {
			return header, nil
		}
		if err != nil {
			return nil, err
		}
		if err := sr.record(recordType(t)); err != nil {
			return nil, fmt.Errorf("record %d (type %d): %w", n, t, err)
		}
	}
}

func (sr *snapshotReader) record(t recordType) error {
	rs := sr.rs
	switch t {
	case recordTableIndex:
		var m droverv1.TableIndex
		if err := sr.message(&m); err != nil {
			return err
		}
		return rs.TableIndex(m.GetTable(), m.GetIndex())
	case recordNode:
		return restoreAs(sr, &droverv1.Node{}, rs.Node)
	case recordJobVersion:
		return restoreAs(sr, &droverv1.Job{}, rs.JobVersion)
	case recordJob:
		return restoreAs(sr, &droverv1.Job{}, rs.Job)
	case recordEval:
		return restoreAs(sr, &droverv1.Evaluation{}, rs.Eval)
	case recordAlloc:
		return restoreAs(sr, &droverv1.Allocation{}, rs.Alloc)
	case recordServer:
		return restoreAs(sr, &droverv1.ServerMember{}, rs.Server)
	case recordJobRequest:
		return restoreAs(sr, &droverv1.JobRequestResult{}, rs.JobRequestResult)
	case recordDeployment:
		return restoreAs(sr, &droverv1.Deployment{}, rs.Deployment)
	case recordACLPolicy:
		return restoreAs(sr, &droverv1.ACLPolicy{}, rs.ACLPolicy)
	case recordACLToken:
		return restoreAs(sr, &droverv1.ACLToken{}, rs.ACLToken)
	case recordACLBootstrap:
		return restoreAs(sr, &droverv1.ACLBootstrapState{}, rs.ACLBootstrap)
	}
	return fmt.Errorf("unknown snapshot record type %d", t)
}

func restoreAs[M vtMessage](sr *snapshotReader, m M, restore func(M) error) error {
	if err := sr.message(m); err != nil {
		return err
	}
	return restore(m)
}

// message reads the next message into m and repairs it if needed.
func (sr *snapshotReader) message(m vtMessage) error {
	buf, err := readRecord(sr.r)
	if err != nil {
		return err
	}
	if err := m.UnmarshalVT(buf); err != nil {
		return err
	}
	if sr.f.makePortable(m, buf) > 0 {
		sr.repaired++
	}
	if upgradeLegacy(m) {
		sr.upgraded++
	}
	return nil
}

// readRecord reads one length-prefixed record.
func readRecord(r *bufio.Reader) ([]byte, error) {
	size, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("record length: %w", err)
	}
	if size > maxRecordSize {
		return nil, fmt.Errorf("record of %d bytes exceeds the %d byte limit", size, maxRecordSize)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("record body: %w", err)
	}
	return buf, nil
}
