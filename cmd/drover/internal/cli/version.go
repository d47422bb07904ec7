package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/droverhq/drover/internal/version"
)

func versionCommand(stdout io.Writer) *ffcli.Command {
	return &ffcli.Command{
		Name:       "version",
		ShortUsage: "drover version",
		ShortHelp:  "Print the build version.",
		FlagSet:    flag.NewFlagSet("drover version", flag.ContinueOnError),
		Exec: func(context.Context, []string) error {
			_, err := fmt.Fprintln(stdout, version.String())
			return err
		},
	}
}
