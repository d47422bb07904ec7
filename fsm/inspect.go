package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// recordTables names the table of each snapshot record type.
var recordTables = map[recordType]string{
	recordTableIndex:   "index",
	recordNode:         "nodes",
	recordJobVersion:   "job_versions",
	recordJob:          "jobs",
	recordEval:         "evals",
	recordAlloc:        "allocs",
	recordServer:       "servers",
	recordJobRequest:   "job_requests",
	recordDeployment:   "deployments",
	recordACLPolicy:    "acl_policies",
	recordACLToken:     "acl_tokens",
	recordACLBootstrap: "acl_bootstrap",
}

// TableCount is how many records of one table a snapshot holds, and their
// size.
type TableCount struct {
	Table   string
	Records int
	Bytes   int64
}

// InspectSnapshot reads a snapshot in the layout WriteSnapshot writes and
// counts its records per table, in the order they come, without building
// any state. It returns the snapshot's header.
func InspectSnapshot(r io.Reader) (*droverv1.SnapshotHeader, []TableCount, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	header, err := readHeader(br)
	if err != nil {
		return nil, nil, err
	}
	var counts []TableCount
	at := map[recordType]int{}
	for n := 0; ; n++ {
		t, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return header, counts, nil
		}
		if err != nil {
			return nil, nil, err
		}
		name, ok := recordTables[recordType(t)]
		if !ok {
			return nil, nil, fmt.Errorf("record %d: unknown snapshot record type %d", n, t)
		}
		rec, err := readRecord(br)
		if err != nil {
			return nil, nil, fmt.Errorf("record %d (%s): %w", n, name, err)
		}
		i, seen := at[recordType(t)]
		if !seen {
			i = len(counts)
			at[recordType(t)] = i
			counts = append(counts, TableCount{Table: name})
		}
		counts[i].Records++
		counts[i].Bytes += int64(len(rec))
	}
}

// ReindexSnapshot copies a snapshot from r to w with its applied index and
// every table's index set to index. A restored backup starts at a raft
// index past everything the cluster has handed out, and so must its state:
// indexes never go back for a client, and every blocking query wakes.
func ReindexSnapshot(r io.Reader, w io.Writer, index uint64) error {
	br := bufio.NewReaderSize(r, 1<<20)
	header, err := readHeader(br)
	if err != nil {
		return err
	}
	header.LastIndex = index
	rw := &recordWriter{w: w}
	rw.raw(snapshotMagic)
	rw.message(0, header, false)
	for n := 0; rw.err == nil; n++ {
		t, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		rec, err := readRecord(br)
		if err != nil {
			return fmt.Errorf("record %d: %w", n, err)
		}
		if recordType(t) == recordTableIndex {
			ti := &droverv1.TableIndex{}
			if err := ti.UnmarshalVT(rec); err != nil {
				return fmt.Errorf("record %d: %w", n, err)
			}
			ti.Index = index
			rw.message(recordTableIndex, ti, true)
			continue
		}
		rw.rawRecord(recordType(t), rec)
	}
	return rw.err
}

// CheckSnapshot reads a whole snapshot as Restore would, into a state that
// is then dropped, and returns the first problem: a snapshot that passes
// restores. The FSM's own state is not touched. raft panics on a restore
// that fails, so the leader checks a backup this way first.
func (f *FSM) CheckSnapshot(r io.Reader) error {
	rs, err := f.state.Restore()
	if err != nil {
		return err
	}
	defer rs.Abort()
	sr := &snapshotReader{f: f, r: bufio.NewReaderSize(r, 1<<20), rs: rs}
	header, err := sr.read()
	if err == nil {
		err = f.restoreClusterMetadata(rs, header)
	}
	for _, b := range header.GetIpReleases() {
		if err != nil {
			break
		}
		err = rs.IPBlockReleases(b)
	}
	return err
}

// readHeader reads a snapshot's magic and header as they are, unrepaired.
func readHeader(br *bufio.Reader) (*droverv1.SnapshotHeader, error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, snapshotMagic) {
		return nil, errors.New("not a drover snapshot (bad magic)")
	}
	raw, err := readRecord(br)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	header := &droverv1.SnapshotHeader{}
	if err := header.UnmarshalVT(raw); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	return header, nil
}
