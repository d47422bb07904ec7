package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/template"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// completionScripts are the templates of `drover completion SHELL`, by
// shell; each is filled with the commands of completionCommands.
func completionScripts() map[string]string {
	return map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}
}

// completionCommand prints a shell's completion script for the commands
// under root. The script is generated from root's command table when it
// is asked for, so it lists exactly the commands and flags of this binary.
func completionCommand(root *ffcli.Command, stdout io.Writer) *ffcli.Command {
	return &ffcli.Command{
		Name:       "completion",
		ShortUsage: "drover completion bash|zsh|fish",
		ShortHelp:  "Print a shell completion script.",
		LongHelp: "Print a script that completes drover's commands, subcommands and flags in\n" +
			"the given shell. Load it in the shell's start-up file:\n\n" +
			"  bash:  source <(drover completion bash)          (in ~/.bashrc)\n" +
			"  zsh:   source <(drover completion zsh)           (in ~/.zshrc, after compinit)\n" +
			"  fish:  drover completion fish | source           (in ~/.config/fish/config.fish)",
		FlagSet: flag.NewFlagSet("drover completion", flag.ContinueOnError),
		Exec: func(_ context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give one shell: bash, zsh or fish")
			}
			return writeCompletion(stdout, args[0], root)
		},
	}
}

// writeCompletion writes shell's completion script for root's commands.
func writeCompletion(w io.Writer, shell string, root *ffcli.Command) error {
	text, ok := completionScripts()[shell]
	if !ok {
		return usageErrorf("no completion for shell %q: want bash, zsh or fish", shell)
	}
	tmpl, err := template.New(shell).Funcs(template.FuncMap{
		"quote":     shellQuote,
		"join":      subcommandWords,
		"flagWords": flagWords,
		"describe":  describeForZsh,
	}).Parse(text)
	if err != nil {
		return fmt.Errorf("completion template for %s: %w", shell, err)
	}
	return tmpl.Execute(w, completionCommands(root))
}

// completionEntry is one command as a completion script sees it.
type completionEntry struct {
	Path        string // "drover job status"
	Name        string // "status"
	Help        string // its ShortHelp
	Subcommands []completionEntry
	Flags       []completionFlag
}

// completionFlag is one flag of a command, by its current name.
type completionFlag struct {
	Name string
	Help string
}

// completionCommands lists root and every command under it, parents
// first. Deprecated aliases are left out: completion teaches the current
// names.
func completionCommands(root *ffcli.Command) []completionEntry {
	var all []completionEntry
	var walk func(cmd *ffcli.Command, path string)
	walk = func(cmd *ffcli.Command, path string) {
		all = append(all, completionEntryOf(cmd, path))
		for _, sub := range cmd.Subcommands {
			walk(sub, path+" "+sub.Name)
		}
	}
	walk(root, root.Name)
	return all
}

func completionEntryOf(cmd *ffcli.Command, path string) completionEntry {
	e := completionEntry{Path: path, Name: cmd.Name, Help: cmd.ShortHelp}
	for _, sub := range cmd.Subcommands {
		e.Subcommands = append(e.Subcommands, completionEntry{Path: path + " " + sub.Name, Name: sub.Name, Help: sub.ShortHelp})
	}
	if cmd.FlagSet != nil {
		cmd.FlagSet.VisitAll(func(f *flag.Flag) {
			if !isDeprecatedAlias(f) {
				help, _, _ := strings.Cut(f.Usage, "\n")
				e.Flags = append(e.Flags, completionFlag{Name: f.Name, Help: help})
			}
		})
	}
	return e
}

// subcommandWords are the names of subs, space-separated.
func subcommandWords(subs []completionEntry) string {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.Name
	}
	return strings.Join(names, " ")
}

// flagWords are the flags as typed, "-address -timeout", space-separated.
func flagWords(flags []completionFlag) string {
	words := make([]string, len(flags))
	for i, f := range flags {
		words[i] = "-" + f.Name
	}
	return strings.Join(words, " ")
}

// describeForZsh is "name:help" as zsh's _describe reads it, with the
// colons in name escaped.
func describeForZsh(name, help string) string {
	return strings.ReplaceAll(name, ":", `\:`) + ":" + help
}

// shellQuote quotes s for bash, zsh and fish alike: in single quotes,
// each single quote closed, escaped and reopened. fish reads '\” inside
// single quotes as a quote too.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
