package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// deprecatedAlias is a flag kept under its old name for one release after
// a rename: setting it sets the flag it became, after a one-line warning
// on the flag set's output (stderr), so scripts keep working and their
// owners learn the new name.
type deprecatedAlias struct {
	fs      *flag.FlagSet
	old     string
	current string
	isBool  bool
}

// aliasFlag defines old on fs as a deprecated alias of the flag current,
// which must already be defined.
func aliasFlag(fs *flag.FlagSet, old, current string) {
	target := fs.Lookup(current)
	a := &deprecatedAlias{fs: fs, old: old, current: current, isBool: isBoolFlag(target)}
	fs.Var(a, old, "deprecated: use -"+current)
}

func (a *deprecatedAlias) String() string { return "" }

// Set warns, then sets the current flag.
func (a *deprecatedAlias) Set(v string) error {
	fmt.Fprintf(a.fs.Output(), "warning: -%s is deprecated and goes in the next release; use -%s\n", a.old, a.current)
	return a.fs.Set(a.current, v)
}

// IsBoolFlag lets an alias of a boolean flag stand without a value.
func (a *deprecatedAlias) IsBoolFlag() bool { return a.isBool }

// isDeprecatedAlias reports whether f is an old name kept by aliasFlag;
// suggestions and shell completion offer only current names.
func isDeprecatedAlias(f *flag.Flag) bool {
	_, ok := f.Value.(*deprecatedAlias)
	return ok
}

// envWithAlias reads the environment variable current, else its old name
// old, warning on w when the old name is the one set.
func envWithAlias(w io.Writer, current, old string) string {
	if v := strings.TrimSpace(os.Getenv(current)); v != "" {
		return v
	}
	v := strings.TrimSpace(os.Getenv(old))
	if v != "" {
		fmt.Fprintf(w, "warning: $%s is deprecated and goes in the next release; use $%s\n", old, current)
	}
	return v
}
