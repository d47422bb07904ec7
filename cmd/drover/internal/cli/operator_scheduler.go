package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// operatorSchedulerCommand groups the commands on scheduler workers and
// the leader's scheduling queues.
func operatorSchedulerCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "scheduler",
		ShortUsage: "drover operator scheduler <subcommand> [flags]",
		ShortHelp:  "Inspect and change scheduler workers; read the leader's scheduling queues.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			schedulerWorkersCommand(stdout, stderr),
			schedulerSetConfigCommand(stdout, stderr),
			schedulerStatsCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

func schedulerWorkersCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator scheduler workers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "workers",
		ShortUsage: "drover operator scheduler workers [flags]",
		ShortHelp:  "List the scheduler workers of the server asked.",
		LongHelp: "List the scheduler workers of the server -address names (each server runs\n" +
			"its own; this is not forwarded) with what each is doing.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := callOperator(ctx, opts, stderr, "listing scheduler workers",
				func(ctx context.Context, c droverv1.OperatorServiceClient) (*droverv1.SchedulerWorkersResponse, error) {
					return c.SchedulerWorkers(ctx, &droverv1.SchedulerWorkersRequest{})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			return printWorkers(stdout, resp, time.Now())
		},
	}
}

// setConfigFlags are the changes `scheduler set-config` asks for.
type setConfigFlags struct {
	workers       int
	workersSet    bool
	schedulers    string
	pause, resume bool
}

// request turns the flags into the change to ask for, naming the flag that
// is wrong when one is.
func (f *setConfigFlags) request() (*droverv1.UpdateSchedulerWorkersRequest, error) {
	req := &droverv1.UpdateSchedulerWorkersRequest{}
	if f.workersSet {
		if f.workers < 0 || f.workers > droverv1.MaxSchedulerWorkers {
			return nil, fmt.Errorf("-workers %d: want 0 to %d", f.workers, droverv1.MaxSchedulerWorkers)
		}
		n := int32(f.workers)
		req.NumWorkers = &n
	}
	if f.schedulers != "" {
		types, err := ParseSchedulerTypes(f.schedulers)
		if err != nil {
			return nil, fmt.Errorf("-schedulers: %w", err)
		}
		req.EnabledSchedulers = types
	}
	switch {
	case f.pause && f.resume:
		return nil, usageErrorf("give at most one of -pause and -resume")
	case f.pause || f.resume:
		paused := f.pause
		req.Paused = &paused
	}
	if req.NumWorkers == nil && len(req.EnabledSchedulers) == 0 && req.Paused == nil {
		return nil, errors.New("nothing to change: give -workers, -schedulers, -pause or -resume")
	}
	return req, nil
}

func schedulerSetConfigCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator scheduler set-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var f setConfigFlags
	fs.Func("workers", "run `N` workers; 0 stops scheduling on this server", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("want a whole number")
		}
		f.workers, f.workersSet = n, true
		return nil
	})
	fs.StringVar(&f.schedulers, "schedulers", "", "comma-separated scheduler types the workers take: service, batch, system")
	fs.BoolVar(&f.pause, "pause", false, "pause every worker before its next evaluation")
	fs.BoolVar(&f.resume, "resume", false, "resume paused workers")
	return &ffcli.Command{
		Name:       "set-config",
		ShortUsage: "drover operator scheduler set-config [flags] [-workers N] [-schedulers LIST] [-pause | -resume]",
		ShortHelp:  "Change the scheduler workers of the server asked.",
		LongHelp: "Change, at run time, the worker pool of the server -address names: how\n" +
			"many workers, which scheduler types they take, paused or not. What is not\n" +
			"given stays as it is. The change lasts until the server restarts. Prints\n" +
			"the resulting configuration and workers.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			req, err := f.request()
			if err != nil {
				fs.Usage()
				return asUsage(err)
			}
			resp, err := callOperator(ctx, opts, stderr, "changing scheduler workers",
				func(ctx context.Context, c droverv1.OperatorServiceClient) (*droverv1.SchedulerWorkersResponse, error) {
					return c.UpdateSchedulerWorkers(ctx, req)
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			return printWorkers(stdout, resp, time.Now())
		},
	}
}

// printWorkers writes a server's worker configuration, then one line per
// worker.
func printWorkers(w io.Writer, resp *droverv1.SchedulerWorkersResponse, now time.Time) error {
	names := make([]string, len(resp.GetEnabledSchedulers()))
	for i, t := range resp.GetEnabledSchedulers() {
		names[i] = enumName(t)
	}
	err := printFields(w, []field{
		{"Server ID", resp.GetServerId()},
		{"Workers", strconv.Itoa(int(resp.GetNumWorkers()))},
		{"Enabled Schedulers", orNone(strings.Join(names, ","))},
		{"Paused", strconv.FormatBool(resp.GetPaused())},
	})
	if err != nil {
		return err
	}
	if len(resp.GetWorkers()) == 0 {
		_, err := fmt.Fprintln(w, "\nNo workers running")
		return err
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tStatus\tEval ID\tJob ID\tStarted\tAcked\tNacked")
	for _, wk := range resp.GetWorkers() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", wk.GetId(), wk.GetStatus(),
			orDash(shortID(wk.GetEvalId())), orDash(wk.GetJobId()), formatAgo(wk.GetStartedAt(), now),
			wk.GetEvalsAcked(), wk.GetEvalsNacked())
	}
	return tw.Flush()
}

// orDash shows an empty table cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func schedulerStatsCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator scheduler stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "stats",
		ShortUsage: "drover operator scheduler stats [flags]",
		ShortHelp:  "Show the leader's eval broker, blocked evaluations and plan queue.",
		LongHelp: "Show the leader's eval broker (evaluations ready, unacknowledged, waiting\n" +
			"behind another of their job, delayed, cancelable, failed; ready and unacked\n" +
			"per scheduler), its blocked evaluations and its plan queue.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := callOperator(ctx, opts, stderr, "reading scheduler stats",
				func(ctx context.Context, c droverv1.OperatorServiceClient) (*droverv1.SchedulerStatsResponse, error) {
					return c.SchedulerStats(ctx, &droverv1.SchedulerStatsRequest{})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			return printSchedulerStats(stdout, resp)
		},
	}
}

func printSchedulerStats(w io.Writer, st *droverv1.SchedulerStatsResponse) error {
	itoa := func(n int32) string { return strconv.Itoa(int(n)) }
	fmt.Fprintln(w, "Eval Broker")
	err := printFields(w, []field{
		{"Ready", itoa(st.GetReady())},
		{"Unacked", itoa(st.GetUnacked())},
		{"Pending", itoa(st.GetPending())},
		{"Delayed", itoa(st.GetDelayed())},
		{"Cancelable", itoa(st.GetCancelable())},
		{"Failed", itoa(st.GetFailed())},
	})
	if err != nil {
		return err
	}
	if len(st.GetByScheduler()) > 0 {
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "Scheduler\tReady\tUnacked")
		for _, q := range st.GetByScheduler() {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", enumName(q.GetScheduler()), q.GetReady(), q.GetUnacked())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nBlocked Evaluations")
	err = printFields(w, []field{
		{"Blocked", itoa(st.GetBlocked())},
		{"Escaped", itoa(st.GetBlockedEscaped())},
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPlan Queue")
	return printFields(w, []field{
		{"Depth", itoa(st.GetPlanQueueDepth())},
		{"Plans Applied", strconv.FormatUint(st.GetPlansApplied(), 10)},
		{"Plans Partially Rejected", strconv.FormatUint(st.GetPlansPartiallyRejected(), 10)},
		{"Nodes Rejected", strconv.FormatUint(st.GetPlanNodesRejected(), 10)},
	})
}
