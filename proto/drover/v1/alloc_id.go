package droverv1

import (
	"encoding/binary"
	"time"

	"github.com/google/uuid"
)

// NewAllocationID returns a new allocation id made at now: a UUID of
// version 8 (RFC 9562's layout for custom ids) whose first 32 bits are the
// microseconds since the Unix epoch, wrapping every 71 minutes, and whose
// other 90 free bits are random.
//
// The servers keep allocations in B-trees ordered by id, written copy on
// write: every raft entry copies the path to each allocation it places or
// an agent reports on. Random ids scatter a plan's allocations, and the
// reports that follow it, over the whole tree, one leaf copied per
// allocation; ids made in time order put them side by side, so an entry
// copies a few leaves for hundreds of allocations. The clock comes first
// rather than after a random prefix so that the tree follows it, and in
// microseconds rather than milliseconds so that the first eight digits,
// the short id the CLI shows, still tell allocations apart: those of one
// scheduling pass are made microseconds apart, while among 100,000 random
// ids two share their first eight digits more often than not.
func NewAllocationID(now time.Time) string {
	id := uuid.New()
	binary.BigEndian.PutUint32(id[0:4], uint32(now.UnixMicro()))
	id[6] = id[6]&0x0f | 0x80 // version 8
	return id.String()
}
