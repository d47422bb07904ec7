// Command drover is the drover control plane: `drover server` runs a server,
// and the other subcommands operate a cluster.
package main

import (
	"context"
	"os"

	"github.com/droverhq/drover/cmd/drover/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
