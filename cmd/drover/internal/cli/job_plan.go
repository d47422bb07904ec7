package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Exit codes of `job plan`, as Nomad's: no change, changes, error.
const (
	planExitChanges = 1
	planExitError   = 255
)

// ExitCodeError ends a command with a chosen exit code, after the command
// has said what it has to say.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }
func (e *ExitCodeError) Unwrap() error { return e.Err }

// ExitCode is the exit code err asks for, and whether it asks for one.
func ExitCode(err error) (int, bool) {
	var e *ExitCodeError
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}

func jobPlanCommand(stdin io.Reader, stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover job plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "plan",
		ShortUsage: "drover job plan [flags] FILE",
		ShortHelp:  "Show what registering a job file would change, without registering it.",
		LongHelp: "Have the leader's scheduler plan the job FILE describes (- for stdin)\n" +
			"against the cluster as it is, writing nothing, and print what changes in\n" +
			"the specification and, per task group, what would be placed, stopped,\n" +
			"updated in place or replaced, and what could not be placed and why.\n" +
			"Exit code 0: no allocation would change; 1: allocations would change;\n" +
			"255: an error. It ends with the `job run -check-index` command that\n" +
			"registers exactly this change, or nothing if the job changed meanwhile.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			err := runJobPlan(ctx, opts, stdin, stdout, stderr, args)
			if err != nil {
				if _, ok := ExitCode(err); !ok {
					return &ExitCodeError{Code: planExitError, Err: err}
				}
			}
			return err
		},
	}
}

func runJobPlan(ctx context.Context, opts *clientOptions, stdin io.Reader, stdout, stderr io.Writer, args []string) error {
	ctx, s, job, closeSession, err := openJobFile(ctx, args, stdin, opts, stderr)
	if err != nil {
		return err
	}
	defer closeSession()
	resp, err := droverv1.NewJobServiceClient(s.conn).Plan(ctx, &droverv1.PlanJobRequest{Job: job})
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("planning job %q", job.GetId()), err)
	}
	if opts.json {
		err = printJSON(stdout, resp)
	} else {
		err = printPlan(stdout, job, args[0], resp)
	}
	if err != nil {
		return err
	}
	if planChangesAllocs(resp) {
		return &ExitCodeError{Code: planExitChanges, Err: &reportedError{msg: "allocations would change"}}
	}
	return nil
}

// planChangesAllocs reports whether the plan places, stops or moves any
// allocation.
func planChangesAllocs(resp *droverv1.PlanJobResponse) bool {
	for _, d := range resp.GetDesiredUpdates() {
		if d.GetPlace()+d.GetStop()+d.GetInPlaceUpdate()+d.GetDestructiveUpdate()+d.GetMigrate()+d.GetCanary() > 0 {
			return true
		}
	}
	return false
}

// printPlan prints a plan for people, groups in the job's order.
func printPlan(w io.Writer, job *droverv1.Job, file string, resp *droverv1.PlanJobResponse) error {
	switch {
	case !resp.GetJobExists():
		fmt.Fprintf(w, "+ Job %q (new)\n", job.GetId())
	case len(resp.GetChanges()) == 0:
		fmt.Fprintf(w, "Job %q: specification unchanged\n", job.GetId())
	default:
		fmt.Fprintf(w, "~ Job %q\n", job.GetId())
		for _, c := range resp.GetChanges() {
			fmt.Fprintf(w, "  %s\n", describeChange(c))
		}
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "Task Group\tPlace\tStop\tIn Place\tReplace\tCanary\tMigrate\tIgnore")
	for _, name := range groupNames(job) {
		d := resp.GetDesiredUpdates()[name]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", name, d.GetPlace(), d.GetStop(), d.GetInPlaceUpdate(),
			d.GetDestructiveUpdate(), d.GetCanary(), d.GetMigrate(), d.GetIgnore())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if f := resp.GetPlacementFailures(); len(f) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Placement Failures")
		for _, pf := range f {
			printPlacementFailure(w, "", pf, true)
		}
		if resp.GetWouldBlock() {
			fmt.Fprintln(w, "An evaluation would wait for capacity to place the rest.")
		}
	}
	printWarnings(w, resp.GetWarnings())
	fmt.Fprintf(w, "\nTo register exactly this change (refused if the job changes meanwhile):\n    drover job run -check-index %d %s\n",
		resp.GetJobModifyIndex(), file)
	return nil
}
