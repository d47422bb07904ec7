package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/droverhq/drover/internal/version"
)

func versionCommand(stdout io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the version, commit, build date and Go version as JSON")
	return &ffcli.Command{
		Name:       "version",
		ShortUsage: "drover version [-json]",
		ShortHelp:  "Print the build version.",
		LongHelp: "Print the release, the git commit it was built from (\", modified\" when the\n" +
			"checkout had uncommitted changes), the commit's date and the Go version.\n" +
			"`make build` and `make release` stamp them; a plain `go build` knows the\n" +
			"commit only from the checkout it ran in.",
		FlagSet: fs,
		Exec: func(context.Context, []string) error {
			if *asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(version.Current())
			}
			_, err := fmt.Fprintln(stdout, version.String())
			return err
		},
	}
}
