// Package version reports the build version of the drover binary and
// compares versions for upgrade gating.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/semver"
)

// Version is the release this source tree builds, in semantic versioning
// without a leading "v". Servers report it to each other, and the leader
// gates new raft entry kinds on it, so it must always parse. A release build
// may override it with
// -ldflags "-X github.com/droverhq/drover/internal/version.Version=...".
var Version = "0.3.0-dev"

// String describes the build: version, commit and Go version.
func String() string {
	commit := "unknown"
	goVersion := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	return fmt.Sprintf("drover %s (commit %s, %s)", Version, commit, goVersion)
}

// Valid reports whether v is a semantic version drover can compare.
func Valid(v string) bool { return semver.IsValid(canonical(v)) }

// AtLeast reports whether have is at least want. Pre-release and build
// suffixes are ignored, so a 0.2.0-dev server counts as 0.2.0: a
// development build of a release understands that release's entries. An
// invalid version never meets a minimum.
func AtLeast(have, want string) bool {
	h, w := canonical(have), canonical(want)
	if !semver.IsValid(h) || !semver.IsValid(w) {
		return false
	}
	return semver.Compare(release(h), release(w)) >= 0
}

func canonical(v string) string {
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v
}

// release strips the pre-release and build suffixes of a valid version.
func release(v string) string {
	v = semver.Canonical(v)
	if pre := semver.Prerelease(v); pre != "" {
		v = strings.TrimSuffix(v, pre)
	}
	return v
}
