// Command drover is the drover control plane: `drover server` runs a server,
// and the other subcommands operate a cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/droverhq/drover/cmd/drover/internal/cli"
)

func main() {
	root := cli.Root(os.Stdout, os.Stderr)
	err := root.ParseAndRun(context.Background(), os.Args[1:])
	code, chosen := cli.ExitCode(err)
	if !chosen {
		code = 1
	}
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case cli.Reported(err):
		// The command has already said what went wrong.
		os.Exit(code)
	default:
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(code)
	}
}
