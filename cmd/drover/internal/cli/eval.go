package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// uuidLen is the length of a full evaluation id; shorter ids are prefixes.
const uuidLen = 36

// evalCommand groups the commands that inspect evaluations.
func evalCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "eval",
		ShortUsage: "drover eval <subcommand> [flags]",
		ShortHelp:  "Inspect evaluations: the scheduler's units of work.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			evalListCommand(stdout, stderr),
			evalStatusCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

func evalListCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover eval list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var jobID string
	var verbose bool
	fs.StringVar(&jobID, "job", "", "only the evaluations of this job")
	fs.BoolVar(&verbose, "verbose", false, "show full ids")
	return &ffcli.Command{
		Name:       "list",
		ShortUsage: "drover eval list [flags]",
		ShortHelp:  "List evaluations, newest first.",
		LongHelp: "List every evaluation, or with -job those of one job, newest first. The\n" +
			"list is read page by page until the last one.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			evals, meta, err := listEvals(ctx, s, jobID)
			if err != nil {
				doing := "listing evaluations"
				if jobID != "" {
					doing = fmt.Sprintf("listing evaluations of job %q", jobID)
				}
				return s.fail(ctx, doing, err)
			}
			if opts.json {
				return printJSON(stdout, &droverv1.ListEvaluationsResponse{Evaluations: evals, Meta: meta})
			}
			return printEvalList(stdout, evals, verbose)
		},
	}
}

// listEvals reads every evaluation, or every one of jobID, page by page.
// The meta is the last page's.
func listEvals(ctx context.Context, s *session, jobID string) ([]*droverv1.Evaluation, *droverv1.QueryMeta, error) {
	if jobID != "" {
		return jobEvals(ctx, s, jobID)
	}
	c := droverv1.NewEvalServiceClient(s.conn)
	var meta *droverv1.QueryMeta
	evals, err := allPages(ctx, func(ctx context.Context, token string) ([]*droverv1.Evaluation, string, error) {
		resp, err := c.List(ctx, &droverv1.ListEvaluationsRequest{Page: &droverv1.PageOptions{NextToken: token}})
		meta = resp.GetMeta()
		return resp.GetEvaluations(), resp.GetNextToken(), err
	})
	return evals, meta, err
}

// jobEvals reads every evaluation of a job, page by page.
func jobEvals(ctx context.Context, s *session, jobID string) ([]*droverv1.Evaluation, *droverv1.QueryMeta, error) {
	c := droverv1.NewJobServiceClient(s.conn)
	var meta *droverv1.QueryMeta
	evals, err := allPages(ctx, func(ctx context.Context, token string) ([]*droverv1.Evaluation, string, error) {
		resp, err := c.Evaluations(ctx, &droverv1.ListJobEvaluationsRequest{JobId: jobID, Page: &droverv1.PageOptions{NextToken: token}})
		meta = resp.GetMeta()
		return resp.GetEvaluations(), resp.GetNextToken(), err
	})
	return evals, meta, err
}

// newestFirst orders evaluations by creation, newest first.
func newestFirst(evals []*droverv1.Evaluation) {
	slices.SortStableFunc(evals, func(a, b *droverv1.Evaluation) int {
		return cmp.Or(cmp.Compare(b.GetCreateIndex(), a.GetCreateIndex()), strings.Compare(a.GetId(), b.GetId()))
	})
}

func printEvalList(w io.Writer, evals []*droverv1.Evaluation, verbose bool) error {
	if len(evals) == 0 {
		_, err := fmt.Fprintln(w, "No evaluations found")
		return err
	}
	evals = slices.Clone(evals)
	newestFirst(evals)
	id := shortID
	if verbose {
		id = func(s string) string { return s }
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tPriority\tTriggered By\tJob ID\tType\tStatus\tPlacement Failures")
	for _, ev := range evals {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%t\n",
			id(ev.GetId()), ev.GetPriority(), enumName(ev.GetTriggeredBy()), ev.GetJobId(),
			enumName(ev.GetType()), enumName(ev.GetStatus()), len(ev.GetPlacementFailures()) > 0)
	}
	return tw.Flush()
}

func evalStatusCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover eval status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "status",
		ShortUsage: "drover eval status [flags] ID",
		ShortHelp:  "Show one evaluation, with its placement failures.",
		LongHelp: "Show one evaluation: status, trigger, the evaluations it links to, the\n" +
			"allocations still queued and, per task group, why allocations could not be\n" +
			"placed. ID may be a unique prefix of the evaluation id, such as the 8\n" +
			"characters tables show.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one evaluation id")
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			resp, err := lookupEval(ctx, s, args[0])
			if err != nil {
				return s.fail(ctx, fmt.Sprintf("reading evaluation %s", args[0]), err)
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			return printEval(stdout, resp.GetEvaluation())
		},
	}
}

// lookupEval reads the evaluation id names: a full id, or a prefix that
// exactly one evaluation's id starts with.
func lookupEval(ctx context.Context, s *session, id string) (*droverv1.GetEvaluationResponse, error) {
	c := droverv1.NewEvalServiceClient(s.conn)
	if len(id) >= uuidLen {
		return c.Get(ctx, &droverv1.GetEvaluationRequest{EvalId: id})
	}
	// Two matches are enough to know the prefix is ambiguous; a few more
	// make the error useful.
	const shown = 5
	resp, err := c.List(ctx, &droverv1.ListEvaluationsRequest{Page: &droverv1.PageOptions{Prefix: id, PageSize: shown}})
	if err != nil {
		return nil, err
	}
	switch evals := resp.GetEvaluations(); len(evals) {
	case 0:
		return nil, fmt.Errorf("no evaluation has an id starting with %q", id)
	case 1:
		return &droverv1.GetEvaluationResponse{Evaluation: evals[0], Meta: resp.GetMeta()}, nil
	default:
		ids := make([]string, len(evals))
		for i, ev := range evals {
			ids[i] = ev.GetId()
		}
		more := ""
		if resp.GetNextToken() != "" {
			more = ", ..."
		}
		return nil, fmt.Errorf("prefix %q matches more than one evaluation: %s%s", id, strings.Join(ids, ", "), more)
	}
}

// printEval writes one evaluation in full, as `drover eval status` shows it.
func printEval(w io.Writer, ev *droverv1.Evaluation) error {
	failures := ev.GetPlacementFailures()
	fields := []field{
		{"ID", ev.GetId()},
		{"Create Time", formatTime(ev.GetCreateTime())},
		{"Modify Time", formatTime(ev.GetModifyTime())},
		{"Status", enumName(ev.GetStatus())},
		{"Status Description", orNone(ev.GetStatusDescription())},
		{"Type", enumName(ev.GetType())},
		{"Triggered By", enumName(ev.GetTriggeredBy())},
		{"Job ID", ev.GetJobId()},
	}
	if ev.GetNodeId() != "" {
		fields = append(fields, field{"Node ID", ev.GetNodeId()})
	}
	fields = append(fields,
		field{"Priority", strconv.Itoa(int(ev.GetPriority()))},
		field{"Placement Failures", strconv.FormatBool(len(failures) > 0)},
		field{"Previous Eval", orNone(ev.GetPreviousEval())},
		field{"Next Eval", orNone(ev.GetNextEval())},
		field{"Blocked Eval", orNone(ev.GetBlockedEval())},
	)
	if ev.GetWaitUntil() != 0 {
		fields = append(fields, field{"Wait Until", formatTime(ev.GetWaitUntil())})
	}
	if err := printFields(w, fields); err != nil {
		return err
	}
	if err := printQueued(w, ev.GetQueuedAllocations()); err != nil {
		return err
	}
	if err := printClassEligibility(w, ev); err != nil {
		return err
	}
	if len(failures) > 0 {
		fmt.Fprintln(w, "\nFailed Placements")
		for _, pf := range failures {
			printPlacementFailure(w, "", pf, true)
		}
	}
	if ev.GetBlockedEval() != "" {
		fmt.Fprintf(w, "\nEvaluation %q waiting for additional capacity to place remainder\n", shortID(ev.GetBlockedEval()))
	}
	return nil
}

// printQueued writes the allocations still to be placed per task group.
func printQueued(w io.Writer, queued map[string]int32) error {
	if len(queued) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nQueued Allocations")
	tw := newTable(w)
	fmt.Fprintln(tw, "Task Group\tQueued")
	for _, tg := range slices.Sorted(maps.Keys(queued)) {
		fmt.Fprintf(tw, "%s\t%d\n", tg, queued[tg])
	}
	return tw.Flush()
}

// printClassEligibility writes, for a blocked evaluation, which node
// classes could host it: capacity appearing in those unblocks it.
func printClassEligibility(w io.Writer, ev *droverv1.Evaluation) error {
	classes := ev.GetClassEligibility()
	if len(classes) == 0 && !ev.GetEscapedComputedClass() {
		return nil
	}
	fmt.Fprintln(w, "\nClass Eligibility")
	if ev.GetEscapedComputedClass() {
		fmt.Fprintln(w, "The job's constraints escape node classes: any capacity change may unblock it.")
	}
	if len(classes) == 0 {
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "Class\tEligible")
	for _, class := range slices.Sorted(maps.Keys(classes)) {
		fmt.Fprintf(tw, "%s\t%t\n", class, classes[class])
	}
	return tw.Flush()
}

// printPlacementFailure explains, as the Nomad CLI does, why a task group's
// allocations could not all be placed. detailed adds how many nodes were
// looked at.
//
//	Task Group "web" (failed to place 3 allocations):
//	  * Resources exhausted on 5 nodes
//	  * Dimension "memory" exhausted on 5 nodes
func printPlacementFailure(w io.Writer, indent string, pf *droverv1.PlacementFailure, detailed bool) {
	fmt.Fprintf(w, "%sTask Group %q (failed to place %s):\n", indent, pf.GetTaskGroup(), plural(pf.GetUnplaced(), "allocation"))
	item := func(format string, a ...any) {
		fmt.Fprintf(w, "%s  * %s\n", indent, fmt.Sprintf(format, a...))
	}
	switch {
	case pf.GetNodesEvaluated() == 0:
		item("No nodes were eligible for evaluation")
	case detailed:
		item("Evaluated %s: %d filtered, %d exhausted", plural(pf.GetNodesEvaluated(), "node"), pf.GetNodesFiltered(), pf.GetNodesExhausted())
	}
	available := pf.GetNodesAvailable()
	for _, dc := range slices.Sorted(maps.Keys(available)) {
		if available[dc] == 0 {
			item("No nodes are available in datacenter %q", dc)
		}
	}
	filtered := pf.GetFilteredBy()
	for _, reason := range slices.Sorted(maps.Keys(filtered)) {
		item("Filter %q excluded %s", reason, plural(filtered[reason], "node"))
	}
	if pf.GetNodesExhausted() > 0 {
		item("Resources exhausted on %s", plural(pf.GetNodesExhausted(), "node"))
	}
	exhausted := pf.GetExhaustedBy()
	for _, dim := range slices.Sorted(maps.Keys(exhausted)) {
		item("Dimension %q exhausted on %s", dim, plural(exhausted[dim], "node"))
	}
}

// failureSummary is a one-cell summary of an evaluation's placement
// failures: "web: 3 unplaced, db: 1 unplaced", or "-" when there are none.
func failureSummary(ev *droverv1.Evaluation) string {
	failures := ev.GetPlacementFailures()
	if len(failures) == 0 {
		return "-"
	}
	parts := make([]string, len(failures))
	for i, pf := range failures {
		parts[i] = fmt.Sprintf("%s: %d unplaced", pf.GetTaskGroup(), pf.GetUnplaced())
	}
	return strings.Join(parts, ", ")
}
