// Package version reports the build version of the drover binary.
package version

import (
	"fmt"
	"runtime/debug"
)

// Version is set at build time with
// -ldflags "-X github.com/droverhq/drover/internal/version.Version=...".
var Version = "dev"

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
