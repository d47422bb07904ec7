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

// Commit and BuildDate are stamped by `make build` and `make release`
// (-X ...version.Commit=..., -X ...version.BuildDate=...): the git commit
// and that commit's date (not the time of the build, so that two builds of
// one commit are the same bytes). Unstamped, Commit falls back to what the
// Go toolchain recorded of the checkout, if anything.
var (
	Commit    = ""
	BuildDate = ""
)

// Build describes the running binary.
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date,omitempty"`
	GoVersion string `json:"go_version"`
	// Modified is true when the binary was built from a checkout with
	// uncommitted changes (as far as the toolchain or the stamp knows).
	Modified bool `json:"modified,omitempty"`
}

// Current returns what this binary knows of its build.
func Current() Build {
	b := Build{Version: Version, Commit: Commit, BuildDate: BuildDate, GoVersion: "unknown"}
	if info, ok := debug.ReadBuildInfo(); ok {
		b.GoVersion = info.GoVersion
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.modified" && Commit == "":
				b.Modified = s.Value == "true"
			}
		}
	}
	if strings.HasSuffix(b.Commit, "-dirty") {
		b.Commit, b.Modified = strings.TrimSuffix(b.Commit, "-dirty"), true
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

// String describes the build in one line: version, commit (marked when
// built with uncommitted changes), build date and Go version.
func String() string {
	b := Current()
	commit := b.Commit
	if b.Modified {
		commit += ", modified"
	}
	if b.BuildDate != "" {
		commit += ", " + b.BuildDate
	}
	return fmt.Sprintf("drover %s (commit %s, %s)", b.Version, commit, b.GoVersion)
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
