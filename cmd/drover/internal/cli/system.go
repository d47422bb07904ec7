package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// systemCommand groups the commands that act on the cluster's state as a
// whole.
func systemCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover system", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "system",
		ShortUsage: "drover system <subcommand> [flags]",
		ShortHelp:  "Maintain the cluster's state.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			systemGCCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

func systemGCCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover system gc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "gc",
		ShortUsage: "drover system gc [flags]",
		ShortHelp:  "Run garbage collection now.",
		LongHelp: "Ask the leader to run garbage collection now, with every age threshold at\n" +
			"zero: down nodes whose allocations are all terminal, terminal allocations\n" +
			"and evaluations, stopped jobs and job versions no longer used are deleted\n" +
			"at once. Prints what was deleted.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := callOperator(ctx, opts, stderr, "collecting garbage",
				func(ctx context.Context, c droverv1.OperatorServiceClient) (*droverv1.GarbageCollectResponse, error) {
					return c.GarbageCollect(ctx, &droverv1.GarbageCollectRequest{})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			_, err = fmt.Fprintln(stdout, gcSummary(resp))
			return err
		},
	}
}

// gcSummary says what a garbage collection deleted:
//
//	Garbage collection deleted 2 nodes, 40 allocations, 12 evaluations, 1 job and 3 job versions in 1 raft entry
func gcSummary(r *droverv1.GarbageCollectResponse) string {
	if r.GetNodes()+r.GetAllocs()+r.GetEvals()+r.GetJobs()+r.GetJobVersions() == 0 {
		return "Garbage collection found nothing to delete"
	}
	counts := []string{
		count64(r.GetNodes(), "node"),
		count64(r.GetAllocs(), "allocation"),
		count64(r.GetEvals(), "evaluation"),
		count64(r.GetJobs(), "job"),
		count64(r.GetJobVersions(), "job version"),
	}
	last := len(counts) - 1
	return fmt.Sprintf("Garbage collection deleted %s and %s in %s",
		strings.Join(counts[:last], ", "), counts[last], count64(r.GetEntries(), "raft entry"))
}

// count64 counts a noun as plural does, for 64-bit counts; "entry" becomes
// "entries".
func count64(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
