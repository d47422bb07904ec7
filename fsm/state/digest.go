package state

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"iter"

	"google.golang.org/protobuf/proto"
)

// Digest returns, for each table, a SHA-256 over every row in key order,
// deterministically encoded. Servers that applied the same log have the same
// digests, so comparing them checks that replicas agree. The ip_blocks entry
// covers the addresses' release history (what is held follows from the
// allocations), which decides the order addresses are handed out in.
func (s *Snapshot) Digest() map[string]string {
	indexes := sha256.New()
	for table, index := range s.TableIndexes() {
		writeRecord(indexes, binary.BigEndian.AppendUint64([]byte(table), index))
	}
	return map[string]string{
		TableNodes:       digestOf(s.Nodes()),
		TableJobs:        digestOf(s.Jobs()),
		TableJobVersions: digestOf(s.AllJobVersions()),
		TableAllocs:      digestOf(s.Allocs()),
		TableEvals:       digestOf(s.Evals()),
		TableServers:     digestOf(s.Servers()),
		TableJobRequests: digestOf(s.JobRequestResults()),
		tableIPBlocks:    digestOf(s.IPBlockReleases()),
		TableIndex:       hex.EncodeToString(indexes.Sum(nil)),
	}
}

func digestOf[T proto.Message](seq iter.Seq[T]) string {
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	var buf []byte
	for obj := range seq {
		var err error
		if buf, err = opts.MarshalAppend(buf[:0], obj); err != nil {
			// Stored objects always marshal; failing here is a bug.
			panic("state: digest: " + err.Error())
		}
		writeRecord(h, buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeRecord writes a length-prefixed record, so that record boundaries
// count in the hash.
func writeRecord(h interface{ Write([]byte) (int, error) }, rec []byte) {
	_, _ = h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(rec))))
	_, _ = h.Write(rec)
}
