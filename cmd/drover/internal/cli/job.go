package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// jobCommand groups the commands that run, inspect and stop jobs. stdin is
// where `job run -` reads the job file.
func jobCommand(stdin io.Reader, stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover job", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "job",
		ShortUsage: "drover job <subcommand> [flags]",
		ShortHelp:  "Run, inspect and stop jobs.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			jobRunCommand(stdin, stdout, stderr),
			jobStatusCommand(stdout, stderr),
			jobStopCommand(stdout, stderr),
			jobPlanCommand(stdin, stdout, stderr),
			jobValidateCommand(stdin, stdout, stderr),
			jobHistoryCommand(stdout, stderr),
			jobRevertCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

func jobRunCommand(stdin io.Reader, stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover job run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	w := jobWriteFlags(fs, "registered")
	checkIndex := fs.Int64("check-index", -1, "register only if the job's job_modify_index is still this one (0: only if the job does not exist); see `drover job status`")
	return &ffcli.Command{
		Name:       "run",
		ShortUsage: "drover job run [flags] FILE",
		ShortHelp:  "Register a job from a JSON job file and follow its evaluation and deployment.",
		LongHelp: "Register (create or update) the job FILE describes, - for stdin; see\n" +
			"docs/jobs.md for the format. Unless -detach, follow the evaluation that\n" +
			"schedules the job until it finishes and summarise what it placed and why\n" +
			"anything could not be placed, then the deployment that rolls the version\n" +
			"out until it ends (exit code 1 if it fails) or waits for its canaries to\n" +
			"be promoted; -json prints the registration's answer instead, and\n" +
			"follows nothing. -timeout bounds the whole command, the\n" +
			"follow included; Ctrl-C stops following and leaves the job registered.\n" +
			"With -check-index N the job is registered only if nobody changed it\n" +
			"since it was at job_modify_index N; the server checks when it writes.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			ctx, s, job, closeSession, err := openJobFile(ctx, args, stdin, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			req := &droverv1.RegisterJobRequest{Job: job, RequestId: w.id()}
			if *checkIndex >= 0 {
				idx := uint64(*checkIndex)
				req.EnforceIndex = &idx
			}
			resp, err := droverv1.NewJobServiceClient(s.conn).Register(ctx, req)
			if err != nil {
				return s.fail(ctx, fmt.Sprintf("registering job %q", job.GetId()), err)
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			fmt.Fprintf(stdout, "Job %q registered at version %d\n", job.GetId(), resp.GetJobVersion())
			printWarnings(stdout, resp.GetWarnings())
			if err := afterJobWrite(ctx, s, stdout, resp.GetEvalId(), w.detach, groupNames(job)); err != nil || w.detach {
				return err
			}
			return followDeployment(ctx, s, stdout, job.GetId(), resp.GetJobModifyIndex())
		},
	}
}

func jobStopCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover job stop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	w := jobWriteFlags(fs, "marked stopped")
	return &ffcli.Command{
		Name:       "stop",
		ShortUsage: "drover job stop [flags] ID",
		ShortHelp:  "Stop a job and follow the evaluation that stops its allocations.",
		LongHelp: "Mark the job stopped; its evaluation stops every allocation. The job\n" +
			"record stays, with status dead, until garbage collection. Unless -detach,\n" +
			"follow the evaluation as `drover job run` does.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one job id")
			}
			id := args[0]
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			resp, err := droverv1.NewJobServiceClient(s.conn).Deregister(ctx,
				&droverv1.DeregisterJobRequest{JobId: id, RequestId: w.id()})
			if err != nil {
				return s.fail(ctx, fmt.Sprintf("stopping job %q", id), err)
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			fmt.Fprintf(stdout, "Job %q stopped\n", id)
			return afterJobWrite(ctx, s, stdout, resp.GetEvalId(), w.detach, nil)
		},
	}
}

// jobWrite holds the flags shared by the commands that write a job.
type jobWrite struct {
	detach    bool
	requestID string
}

// jobWriteFlags defines -detach and -request-id; done says what the write
// leaves the job as, for the help text.
func jobWriteFlags(fs *flag.FlagSet, done string) *jobWrite {
	w := &jobWrite{}
	fs.BoolVar(&w.detach, "detach", false, "return once the job is "+done+" instead of following its evaluation")
	fs.StringVar(&w.requestID, "request-id", "", "idempotency key of the write (default: a new UUID); repeat it to retry safely")
	return w
}

// id is the write's request id: the flag's, or a new UUID.
func (w *jobWrite) id() string {
	if w.requestID == "" {
		w.requestID = uuid.NewString()
	}
	return w.requestID
}

// afterJobWrite prints the evaluation a job write created and, unless
// detach, follows it.
func afterJobWrite(ctx context.Context, s *session, stdout io.Writer, evalID string, detach bool, groups []string) error {
	if evalID == "" {
		_, err := fmt.Fprintln(stdout, "No evaluation was created")
		return err
	}
	fmt.Fprintf(stdout, "Evaluation ID: %s\n", evalID)
	if detach {
		return nil
	}
	return followEval(ctx, s, stdout, evalID, groups)
}

// groupNames lists a job's task groups in the order of the job.
func groupNames(job *droverv1.Job) []string {
	names := make([]string, 0, len(job.GetTaskGroups()))
	for _, tg := range job.GetTaskGroups() {
		names = append(names, tg.GetName())
	}
	return names
}

// jobAllocs reads every allocation of a job, page by page. The meta is the
// last page's.
func jobAllocs(ctx context.Context, s *session, jobID string) ([]*droverv1.Allocation, *droverv1.QueryMeta, error) {
	c := droverv1.NewJobServiceClient(s.conn)
	var meta *droverv1.QueryMeta
	allocs, err := allPages(ctx, func(ctx context.Context, token string) ([]*droverv1.Allocation, string, error) {
		resp, err := c.Allocations(ctx, &droverv1.ListJobAllocationsRequest{JobId: jobID, Page: &droverv1.PageOptions{NextToken: token}})
		meta = resp.GetMeta()
		return resp.GetAllocations(), resp.GetNextToken(), err
	})
	return allocs, meta, err
}
