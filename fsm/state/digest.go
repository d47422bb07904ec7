package state

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"iter"
	"strconv"

	"google.golang.org/protobuf/proto"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Digest returns, for each table, a SHA-256 over every row in key order,
// deterministically encoded. Servers that applied the same log have the same
// digests, so comparing them checks that replicas agree. Rows are encoded by
// the standard protobuf runtime, which refuses a string that is not valid
// UTF-8; the FSM never stores one, but should a row hold one anyway, Digest
// names it in its error. The ip_blocks entry covers the addresses' release
// history (what is held follows from the allocations), which decides the
// order addresses are handed out in.
func (s *Snapshot) Digest() (map[string]string, error) {
	indexes := sha256.New()
	for table, index := range s.TableIndexes() {
		writeRecord(indexes, binary.BigEndian.AppendUint64([]byte(table), index))
	}
	var err error
	digests := map[string]string{
		TableNodes:        digestOf(&err, TableNodes, s.Nodes()),
		TableJobs:         digestOf(&err, TableJobs, s.Jobs()),
		TableJobVersions:  digestOf(&err, TableJobVersions, s.AllJobVersions()),
		TableAllocs:       digestOf(&err, TableAllocs, s.Allocs()),
		TableEvals:        digestOf(&err, TableEvals, s.Evals()),
		TableServers:      digestOf(&err, TableServers, s.Servers()),
		TableDeployments:  digestOf(&err, TableDeployments, s.Deployments()),
		TableJobRequests:  digestOf(&err, TableJobRequests, s.JobRequestResults()),
		TableClusterMeta:  digestOf(&err, TableClusterMeta, all[*droverv1.ClusterMetadata](s, TableClusterMeta, indexID)),
		tableIPBlocks:     digestOf(&err, tableIPBlocks, s.IPBlockReleases()),
		TableACLPolicies:  digestOf(&err, TableACLPolicies, s.ACLPolicies()),
		TableACLTokens:    digestOf(&err, TableACLTokens, s.ACLTokens()),
		TableACLBootstrap: digestOf(&err, TableACLBootstrap, all[*droverv1.ACLBootstrapState](s, TableACLBootstrap, indexID)),
		TableIndex:        hex.EncodeToString(indexes.Sum(nil)),
	}
	if err != nil {
		return nil, fmt.Errorf("state digest at index %d: %w", s.Index(), err)
	}
	return digests, nil
}

// digestOf hashes the rows of one table. After the first error, in *err,
// it does nothing.
func digestOf[T proto.Message](err *error, table string, seq iter.Seq[T]) string {
	if *err != nil {
		return ""
	}
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	var buf []byte
	for obj := range seq {
		var mErr error
		if buf, mErr = opts.MarshalAppend(buf[:0], obj); mErr != nil {
			*err = fmt.Errorf("table %s, row %s: %w", table, rowID(obj), mErr)
			return ""
		}
		writeRecord(h, buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// rowID names a row in an error.
func rowID(row proto.Message) string {
	if r, ok := row.(interface{ GetId() string }); ok {
		return strconv.Quote(r.GetId())
	}
	return string(row.ProtoReflect().Descriptor().Name())
}

// writeRecord writes a length-prefixed record, so that record boundaries
// count in the hash.
func writeRecord(h interface{ Write([]byte) (int, error) }, rec []byte) {
	_, _ = h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(rec))))
	_, _ = h.Write(rec)
}
