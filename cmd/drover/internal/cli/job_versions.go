package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func jobValidateCommand(stdin io.Reader, stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover job validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "validate",
		ShortUsage: "drover job validate [flags] FILE",
		ShortHelp:  "Check a job file as the servers would, without registering it.",
		LongHelp: "Parse the job file FILE (- for stdin), have a server fill in the defaults\n" +
			"and check it, and print every problem with the field it is in, then any\n" +
			"warnings. Exits 0 when the job is valid, 1 when it is not or on error.\n" +
			"With -json, print the server's answer, the job as it would be stored\n" +
			"included.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			ctx, s, job, closeSession, err := openJobFile(ctx, args, stdin, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			resp, err := droverv1.NewJobServiceClient(s.conn).Validate(ctx, &droverv1.ValidateJobRequest{Job: job})
			if err != nil {
				return s.fail(ctx, fmt.Sprintf("validating job %q", job.GetId()), err)
			}
			if opts.json {
				if err := printJSON(stdout, resp); err != nil {
					return err
				}
			} else {
				printValidation(stdout, job.GetId(), resp)
			}
			if len(resp.GetViolations()) > 0 {
				return &reportedError{msg: fmt.Sprintf("job %q is invalid", job.GetId())}
			}
			return nil
		},
	}
}

// printValidation prints Validate's answer for people.
func printValidation(w io.Writer, id string, resp *droverv1.ValidateJobResponse) {
	if v := resp.GetViolations(); len(v) > 0 {
		fmt.Fprintf(w, "Job %q is invalid:\n", id)
		for _, fv := range v {
			fmt.Fprintf(w, "  %s: %s\n", fv.GetField(), fv.GetDescription())
		}
	} else {
		fmt.Fprintf(w, "Job %q is valid\n", id)
	}
	printWarnings(w, resp.GetWarnings())
}

// printWarnings prints the warnings the servers returned with a job.
func printWarnings(w io.Writer, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	fmt.Fprintln(w, "Warnings:")
	for _, s := range warnings {
		fmt.Fprintf(w, "  %s\n", s)
	}
}

func jobHistoryCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover job history", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var changes bool
	fs.BoolVar(&changes, "p", false, "show what changed in each version from the one before")
	return &ffcli.Command{
		Name:       "history",
		ShortUsage: "drover job history [flags] ID",
		ShortHelp:  "List the kept versions of a job.",
		LongHelp: "List the versions of the job the servers keep, newest first: version,\n" +
			"whether it is stable (a deployment of it succeeded), whether it is the job\n" +
			"stopped, and when it was submitted. -p adds what changed from the kept version\n" +
			"before. With -json, print the server's answer, changes included.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one job id")
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			resp, err := droverv1.NewJobServiceClient(s.conn).Versions(ctx, &droverv1.JobVersionsRequest{JobId: args[0]})
			if err != nil {
				return s.fail(ctx, fmt.Sprintf("reading the versions of job %q", args[0]), err)
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			return printHistory(stdout, resp.GetVersions(), changes)
		},
	}
}

// printHistory prints versions, newest first, with their changes if asked.
func printHistory(w io.Writer, versions []*droverv1.JobVersion, changes bool) error {
	for i, v := range versions {
		if i > 0 {
			fmt.Fprintln(w)
		}
		j := v.GetJob()
		fields := []field{
			{"Version", strconv.FormatUint(j.GetVersion(), 10)},
			{"Stable", strconv.FormatBool(j.GetStable())},
			{"Stop", strconv.FormatBool(j.GetStop())},
			{"Submit Date", formatTime(j.GetSubmitTime())},
		}
		if err := printFields(w, fields); err != nil {
			return err
		}
		if !changes || i == len(versions)-1 {
			continue
		}
		if len(v.GetChanges()) == 0 {
			fmt.Fprintln(w, "Changes: none in the specification")
			continue
		}
		fmt.Fprintln(w, "Changes:")
		for _, c := range v.GetChanges() {
			fmt.Fprintf(w, "  %s\n", describeChange(c))
		}
	}
	return nil
}

// describeChange is one line of a diff: +added, -removed, ~changed.
func describeChange(c *droverv1.FieldChange) string {
	switch {
	case c.GetOld() == "":
		return fmt.Sprintf("+ %s: %s", c.GetPath(), c.GetNew())
	case c.GetNew() == "":
		return fmt.Sprintf("- %s: %s", c.GetPath(), c.GetOld())
	}
	return fmt.Sprintf("~ %s: %s => %s", c.GetPath(), c.GetOld(), c.GetNew())
}

func jobRevertCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover job revert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	w := jobWriteFlags(fs, "reverted")
	var prior int64
	fs.Int64Var(&prior, "prior-version", -1, "revert only if the job is still at this version")
	return &ffcli.Command{
		Name:       "revert",
		ShortUsage: "drover job revert [flags] ID VERSION",
		ShortHelp:  "Register an earlier version of a job again.",
		LongHelp: "Register the kept version VERSION of the job again, as a new version\n" +
			"(see `drover job history`). With -prior-version N the revert applies\n" +
			"only if the job is still at version N when it is written, so a change\n" +
			"made meanwhile by someone else is never undone by accident. Unless\n" +
			"-detach or -json, follow the evaluation and the deployment as\n" +
			"`drover job run` does.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 2 {
				return usageErrorf("give a job id and the version to revert to")
			}
			id := args[0]
			version, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil {
				return fmt.Errorf("version %q: want a version number", args[1])
			}
			req := &droverv1.RevertJobRequest{JobId: id, Version: version, RequestId: w.id()}
			if prior >= 0 {
				p := uint64(prior)
				req.EnforcePriorVersion = &p
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			resp, err := droverv1.NewJobServiceClient(s.conn).Revert(ctx, req)
			if err != nil {
				return s.fail(ctx, fmt.Sprintf("reverting job %q to version %d", id, version), err)
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			fmt.Fprintf(stdout, "Job %q reverted to version %d, now version %d\n", id, version, resp.GetJobVersion())
			if err := afterJobWrite(ctx, s, stdout, resp.GetEvalId(), w.detach, nil); err != nil || w.detach {
				return err
			}
			return followDeployment(ctx, s, stdout, id, resp.GetJobModifyIndex())
		},
	}
}
