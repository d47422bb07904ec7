package version

import "testing"

func TestAtLeast(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{
		{"0.1.0", "0.1.0", true},
		{"0.2.0", "0.1.9", true},
		{"0.1.0", "0.2.0", false},
		{"1.0.0", "0.9.9", true},
		{"0.2.0-dev", "0.2.0", true},
		{"0.2.0", "0.2.0-beta.1", true},
		{"0.1.9-dev", "0.2.0", false},
		{"v0.3.0", "0.3.0", true},
		{"0.3", "0.3.0", true},
		{"0.3.0+abc", "0.3.0", true},
		{"dev", "0.1.0", false},
		{"", "0.1.0", false},
		{"0.1.0", "garbage", false},
	} {
		if got := AtLeast(tc.have, tc.want); got != tc.ok {
			t.Errorf("AtLeast(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
	}
}

func TestDefaultVersionIsValid(t *testing.T) {
	if !Valid(Version) {
		t.Fatalf("Version %q is not a semantic version", Version)
	}
}
