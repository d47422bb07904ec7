package cli

import (
	"flag"
	"fmt"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// unknownCommand is the UsageError for a word that names none of cmd's
// subcommands, suggesting the closest one.
func unknownCommand(cmd *ffcli.Command, path, word string) error {
	names := make([]string, 0, len(cmd.Subcommands))
	for _, sub := range cmd.Subcommands {
		names = append(names, sub.Name)
	}
	if near, ok := closest(word, names); ok {
		return &UsageError{Command: path, Err: fmt.Errorf("unknown command %q for %q; did you mean %q?", word, path, near)}
	}
	return &UsageError{Command: path, Err: fmt.Errorf("unknown command %q for %q", word, path)}
}

// unknownFlag is the UsageError for a flag fs does not define, suggesting
// the closest flag: by its current name when the closest is a deprecated
// alias.
func unknownFlag(fs *flag.FlagSet, path, name string) error {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if near, ok := closest(name, names); ok {
		if a, isAlias := fs.Lookup(near).Value.(*deprecatedAlias); isAlias {
			near = a.current
		}
		return &UsageError{Command: path, Err: fmt.Errorf("unknown flag -%s for %q; did you mean -%s?", name, path, near)}
	}
	return &UsageError{Command: path, Err: fmt.Errorf("unknown flag -%s for %q", name, path)}
}
