// Package cli implements the drover command line: one file per subcommand.
package cli

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// Root returns the drover command with every subcommand.
func Root(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := &ffcli.Command{
		Name:       "drover",
		ShortUsage: "drover <subcommand> [flags]",
		ShortHelp:  "drover is a Raft-replicated control plane that decides what runs where.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			withServerSubcommands(serverCommand(stderr), stdout, stderr),
			jobCommand(os.Stdin, stdout, stderr),
			evalCommand(stdout, stderr),
			deploymentCommand(stdout, stderr),
			aclCommand(stdout, stderr),
			nodeCommand(stdout, stderr),
			operatorCommand(stdout, stderr),
			systemCommand(stdout, stderr),
			benchCommand(stdout, stderr),
			agentCommand(stdout, stderr),
			devCommand(stdout, stderr),
			versionCommand(stdout),
		},
		Exec: func(context.Context, []string) error { return flag.ErrHelp },
	}
	// completion reads the table it is part of, so its scripts list it too.
	root.Subcommands = append(root.Subcommands, completionCommand(root, stdout))
	return root
}
