package fsm

import (
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestEveryEntryTypeDecodes checks that the entry type table and the
// decoder list the same types.
func TestEveryEntryTypeDecodes(t *testing.T) {
	inTable := map[droverv1.MessageType]bool{}
	for _, e := range droverv1.EntryTypes() {
		inTable[e.Type] = true
		if newEntryMessage(e.Type) == nil {
			t.Errorf("type %s is in the table but cannot be decoded", e.Type)
		}
	}
	for b := range 256 {
		mt := droverv1.MessageType(b)
		if newEntryMessage(mt) != nil && !inTable[mt] {
			t.Errorf("type %d decodes but is not in the entry type table", b)
		}
	}
}
