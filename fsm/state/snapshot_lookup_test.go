package state

import "testing"

// TestLookupMalformedID checks that reading by an id that cannot be a key
// (a prefix, garbage) finds nothing rather than failing.
func TestLookupMalformedID(t *testing.T) {
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	for _, id := range []string{"", "zz", "4f3a", "not-a-uuid-at-all-but-36-chars-long!"} {
		if n := snap.NodeByID(id); n != nil {
			t.Errorf("NodeByID(%q) = %v, want nil", id, n)
		}
		if a := snap.AllocByID(id); a != nil {
			t.Errorf("AllocByID(%q) = %v, want nil", id, a)
		}
		if e := snap.EvalByID(id); e != nil {
			t.Errorf("EvalByID(%q) = %v, want nil", id, e)
		}
	}
}
