package droverv1

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestNewAllocationIDLayout(t *testing.T) {
	tests := []struct {
		name  string
		at    time.Time
		clock string // the first eight digits
	}{
		{"the epoch", time.Unix(0, 0), "00000000"},
		{"one microsecond on", time.Unix(0, 1000), "00000001"},
		{"the last microsecond before the wrap", time.Unix(0, (1<<32-1)*1000), "ffffffff"},
		{"wrapped", time.Unix(0, (1<<32)*1000), "00000000"},
		{"sub-microsecond time dropped", time.Unix(0, 1999), "00000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := NewAllocationID(tt.at)
			u, err := uuid.Parse(id)
			if err != nil {
				t.Fatalf("%q is not a UUID: %v", id, err)
			}
			if id != strings.ToLower(id) || len(id) != 36 {
				t.Errorf("%q: want the canonical lowercase form", id)
			}
			if u.Version() != 8 || u.Variant() != uuid.RFC4122 {
				t.Errorf("%q: version %d, variant %v; want 8, RFC 4122", id, u.Version(), u.Variant())
			}
			if got := id[:8]; got != tt.clock {
				t.Errorf("%q: clock digits %s, want %s", id, got, tt.clock)
			}
		})
	}
}

// TestNewAllocationIDOrderAndUniqueness: ids made later sort later (within
// a wrap), and ids made at the same microsecond still differ.
func TestNewAllocationIDOrderAndUniqueness(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	prev := ""
	for i := range 1000 {
		id := NewAllocationID(base.Add(time.Duration(i) * time.Microsecond))
		if id <= prev {
			t.Fatalf("id %d %s does not sort after %s", i, id, prev)
		}
		prev = id
	}
	seen := make(map[string]bool)
	for range 10_000 {
		id := NewAllocationID(base)
		if seen[id] {
			t.Fatalf("id %s made twice", id)
		}
		seen[id] = true
	}
}
