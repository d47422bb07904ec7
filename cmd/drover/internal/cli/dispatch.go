package cli

import (
	"context"
	"errors"
	"flag"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// Run parses args against root and runs the command they select. It is
// the one way the command line is read: before ffcli parses it, every
// command word is checked against the command table and every flag against
// its command's flags (an unknown one is a UsageError naming the closest
// known one), and a command's flags may come after its arguments
// (`job status web -address X`), which Go's flag package alone stops at.
func Run(ctx context.Context, root *ffcli.Command, args []string) error {
	line, err := normalizeArgs(root, args)
	if err != nil {
		return err
	}
	if err := root.Parse(line.args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &UsageError{Command: line.command, Err: err}
	}
	err = root.Run(ctx)
	var usage *UsageError
	if errors.As(err, &usage) && usage.Command == "" {
		usage.Command = line.command
	}
	return err
}

// commandLine is a command line put in the order ffcli parses: each
// command's flags before its subcommand or its arguments.
type commandLine struct {
	args    []string
	command string // the selected command's path, "drover job status"
}

// normalizeArgs walks args down the command table. A command with
// subcommands takes no arguments: its first word must name a subcommand.
// The last command's flags, wherever they stand, are moved before its
// arguments; "--" still ends the flags.
func normalizeArgs(root *ffcli.Command, args []string) (commandLine, error) {
	cmd, path := root, root.Name
	var out []string
	for {
		flags, positional, err := splitFlags(cmd, path, args, len(cmd.Subcommands) > 0)
		if err != nil {
			return commandLine{command: path}, err
		}
		out = append(out, flags...)
		if len(cmd.Subcommands) == 0 || len(positional) == 0 {
			out = append(out, positional...)
			return commandLine{args: out, command: path}, nil
		}
		word := positional[0]
		sub := findSubcommand(cmd, word)
		if sub == nil {
			return commandLine{command: path}, unknownCommand(cmd, path, word)
		}
		out = append(out, word)
		cmd, path, args = sub, path+" "+sub.Name, positional[1:]
	}
}

// splitFlags separates cmd's flags (with their values) from its other
// words. With stopAtWord, it stops at the first other word and returns it
// and everything after it unread, for a command whose next word is a
// subcommand. A "--" ends the flags; it is put in front of the words so
// the flag package reads none of them as a flag.
func splitFlags(cmd *ffcli.Command, path string, args []string, stopAtWord bool) (flags, words []string, err error) {
	fs := cmd.FlagSet
	if fs == nil {
		fs = flag.NewFlagSet(path, flag.ContinueOnError)
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			if stopAtWord {
				return flags, args[i:], nil
			}
			// Every word now stands behind the flags, so the "--" goes
			// in front of them all.
			return flags, append(append([]string{"--"}, words...), args[i+1:]...), nil
		}
		name, hasValue, isFlag := parseFlagWord(arg)
		if !isFlag {
			if stopAtWord {
				return flags, args[i:], nil
			}
			words = append(words, arg)
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				flags = append(flags, arg) // the flag package answers with the usage
				continue
			}
			return nil, nil, unknownFlag(fs, path, name)
		}
		flags = append(flags, arg)
		if !hasValue && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, words, nil
}

// parseFlagWord reads a word as the flag package does: "-name", "--name",
// "-name=value". A lone "-" (stdin, for commands reading a file) is not a
// flag. Malformed words ("---x", "-=x") count as flags with their raw name
// so the flag package reports them.
func parseFlagWord(arg string) (name string, hasValue, isFlag bool) {
	if len(arg) < 2 || arg[0] != '-' {
		return "", false, false
	}
	name = strings.TrimPrefix(arg[1:], "-")
	name, _, hasValue = strings.Cut(name, "=")
	return name, hasValue, true
}

// isBoolFlag reports whether f takes no value, as the flag package decides.
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// findSubcommand is cmd's subcommand named word, matched as ffcli matches
// (ignoring case), or nil.
func findSubcommand(cmd *ffcli.Command, word string) *ffcli.Command {
	for _, sub := range cmd.Subcommands {
		if strings.EqualFold(sub.Name, word) {
			return sub
		}
	}
	return nil
}
