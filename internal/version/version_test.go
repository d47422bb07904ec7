package version

import (
	"strings"
	"testing"
)

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

func TestCurrentReadsTheStamp(t *testing.T) {
	defer func(c, d string) { Commit, BuildDate = c, d }(Commit, BuildDate)
	for _, tc := range []struct {
		commit, date string
		want         Build
	}{
		{"0123abc", "2026-11-27T09:00:00Z", Build{Commit: "0123abc", BuildDate: "2026-11-27T09:00:00Z"}},
		{"0123abc-dirty", "", Build{Commit: "0123abc", Modified: true}},
	} {
		Commit, BuildDate = tc.commit, tc.date
		got := Current()
		if got.Commit != tc.want.Commit || got.BuildDate != tc.want.BuildDate || got.Modified != tc.want.Modified || got.Version != Version {
			t.Errorf("stamped %q %q: %+v, want %+v", tc.commit, tc.date, got, tc.want)
		}
		if s := String(); !strings.Contains(s, tc.want.Commit) || tc.want.Modified != strings.Contains(s, "modified") {
			t.Errorf("String() = %q for %+v", s, tc.want)
		}
	}
}
