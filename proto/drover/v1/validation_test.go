package droverv1

import "testing"

func TestIsIdentifier(t *testing.T) {
	for s, want := range map[string]bool{
		"web": true, "dc1": true, "a.b-c_d": true, "9lives": true, "A": true,
		"": false, "-x": false, ".x": false, "_x": false, "a b": false, "a/b": false, "é": false, "a\x00": false,
	} {
		if got := isIdentifier(s); got != want {
			t.Errorf("isIdentifier(%q) = %v, want %v", s, got, want)
		}
	}
}
