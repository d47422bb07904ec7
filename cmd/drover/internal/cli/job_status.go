package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// latestEvals is how many of a job's evaluations `job status` shows.
const latestEvals = 5

func jobStatusCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover job status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var verbose bool
	fs.BoolVar(&verbose, "verbose", false, "show full ids")
	return &ffcli.Command{
		Name:       "status",
		ShortUsage: "drover job status [flags] [ID]",
		ShortHelp:  "List jobs, or show one with its allocations and evaluations.",
		LongHelp: "Without ID, list every job. With ID, show the job, its task groups'\n" +
			"allocations counted by client status, its latest evaluations with their\n" +
			"placement failures, and its allocations, newest first. With -json the\n" +
			"one-job form prints {\"job\", \"allocations\", \"evaluations\"}, every\n" +
			"allocation and evaluation of the job included.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 1 {
				return usageErrorf("give at most one job id, not %d", len(args))
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			if len(args) == 0 {
				return listJobs(ctx, s, stdout)
			}
			return showJob(ctx, s, stdout, args[0], verbose)
		},
	}
}

// listJobs prints every job, read page by page.
func listJobs(ctx context.Context, s *session, w io.Writer) error {
	c := droverv1.NewJobServiceClient(s.conn)
	var meta *droverv1.QueryMeta
	jobs, err := allPages(ctx, func(ctx context.Context, token string) ([]*droverv1.Job, string, error) {
		resp, err := c.List(ctx, &droverv1.ListJobsRequest{Page: &droverv1.PageOptions{NextToken: token}})
		meta = resp.GetMeta()
		return resp.GetJobs(), resp.GetNextToken(), err
	})
	if err != nil {
		return s.fail(ctx, "listing jobs", err)
	}
	if s.opts.json {
		return printJSON(w, &droverv1.ListJobsResponse{Jobs: jobs, Meta: meta})
	}
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(w, "No jobs found")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tType\tPriority\tStatus\tVersion\tSubmit Date")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", j.GetId(), enumName(j.GetType()), j.GetPriority(),
			jobStatus(j), j.GetVersion(), formatTime(j.GetSubmitTime()))
	}
	return tw.Flush()
}

// jobStatusJSON is what `job status -json ID` prints.
type jobStatusJSON struct {
	Job         json.RawMessage   `json:"job"`
	Allocations []json.RawMessage `json:"allocations"`
	Evaluations []json.RawMessage `json:"evaluations"`
	// LatestDeployment is null when the job never had one.
	LatestDeployment json.RawMessage `json:"latest_deployment"`
}

// showJob prints one job with its allocations and evaluations.
func showJob(ctx context.Context, s *session, w io.Writer, id string, verbose bool) error {
	resp, err := droverv1.NewJobServiceClient(s.conn).Get(ctx, &droverv1.GetJobRequest{JobId: id})
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("reading job %q", id), err)
	}
	allocs, _, err := jobAllocs(ctx, s, id)
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("listing allocations of job %q", id), err)
	}
	evals, _, err := jobEvals(ctx, s, id)
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("listing evaluations of job %q", id), err)
	}
	deployments, err := droverv1.NewDeploymentServiceClient(s.conn).List(ctx, &droverv1.ListDeploymentsRequest{JobId: id})
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("listing deployments of job %q", id), err)
	}
	var latest *droverv1.Deployment
	if d := deployments.GetDeployments(); len(d) > 0 {
		latest = d[0]
	}
	if s.opts.json {
		return printJobStatusJSON(w, resp.GetJob(), allocs, evals, latest)
	}
	return printJobStatus(w, jobView{job: resp.GetJob(), allocs: allocs, evals: evals, deployment: latest, now: time.Now(), verbose: verbose})
}

func printJobStatusJSON(w io.Writer, job *droverv1.Job, allocs []*droverv1.Allocation, evals []*droverv1.Evaluation, latest *droverv1.Deployment) error {
	var out jobStatusJSON
	var err error
	if latest != nil {
		if out.LatestDeployment, err = jsonMessage(latest); err != nil {
			return err
		}
	}
	if out.Job, err = jsonMessage(job); err != nil {
		return err
	}
	if out.Allocations, err = jsonMessages(allocs); err != nil {
		return err
	}
	if out.Evaluations, err = jsonMessages(evals); err != nil {
		return err
	}
	return printJSONObject(w, out)
}

// jobView is what `job status ID` shows, read from the server.
type jobView struct {
	job    *droverv1.Job
	allocs []*droverv1.Allocation
	evals  []*droverv1.Evaluation
	// deployment is the job's latest, nil if it never had one.
	deployment *droverv1.Deployment
	now        time.Time // allocation ages are relative to it
	verbose    bool      // full ids
}

func (v jobView) id(s string) string {
	if v.verbose {
		return s
	}
	return shortID(s)
}

func printJobStatus(w io.Writer, v jobView) error {
	j := v.job
	err := printFields(w, []field{
		{"ID", j.GetId()},
		{"Name", j.GetName()},
		{"Submit Date", formatTime(j.GetSubmitTime())},
		{"Type", enumName(j.GetType())},
		{"Priority", strconv.Itoa(int(j.GetPriority()))},
		{"Datacenters", strings.Join(j.GetDatacenters(), ",")},
		{"Status", jobStatus(j)},
		{"Version", strconv.FormatUint(j.GetVersion(), 10)},
		{"Stable", strconv.FormatBool(j.GetStable())},
		{"Job Modify Index", strconv.FormatUint(j.GetJobModifyIndex(), 10)},
		{"Stop", strconv.FormatBool(j.GetStop())},
	})
	if err != nil {
		return err
	}
	if err := printGroupSummary(w, j, v.allocs); err != nil {
		return err
	}
	if d := v.deployment; d != nil {
		fmt.Fprintf(w, "\nLatest Deployment\nID          = %s\nStatus      = %s\nDescription = %s\n\n", v.id(d.GetId()), d.GetStatus().Name(), d.GetStatusDescription())
		if err := printDeploymentGroups(w, d); err != nil {
			return err
		}
	}
	evals := slices.Clone(v.evals)
	newestFirst(evals)
	if err := v.printLatestEvals(w, evals); err != nil {
		return err
	}
	if failed := placementToReport(evals); failed != nil {
		fmt.Fprintln(w, "\nPlacement Failure")
		for _, pf := range failed.GetPlacementFailures() {
			printPlacementFailure(w, "", pf, false)
		}
		if failed.GetBlockedEval() != "" {
			fmt.Fprintf(w, "Evaluation %q waiting for additional capacity to place remainder\n", shortID(failed.GetBlockedEval()))
		}
	}
	return v.printAllocs(w)
}

// placementToReport is, as in the Nomad CLI, the newest evaluation with
// placement failures while the job has a blocked evaluation: while nothing
// waits for capacity, old failures no longer matter. evals are sorted
// newest first.
func placementToReport(evals []*droverv1.Evaluation) *droverv1.Evaluation {
	blocked := slices.ContainsFunc(evals, func(ev *droverv1.Evaluation) bool {
		return ev.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_BLOCKED
	})
	if !blocked {
		return nil
	}
	for _, ev := range evals {
		if len(ev.GetPlacementFailures()) > 0 {
			return ev
		}
	}
	return nil
}

// jobStatus is a job's status, marked when the job was stopped.
func jobStatus(j *droverv1.Job) string {
	if j.GetStop() {
		return enumName(j.GetStatus()) + " (stopped)"
	}
	return enumName(j.GetStatus())
}

// printGroupSummary writes per task group the desired count and the
// allocations by client status. Groups that only allocations of an older
// version still name come after the job's own.
func printGroupSummary(w io.Writer, j *droverv1.Job, allocs []*droverv1.Allocation) error {
	counts := make(map[string]map[droverv1.AllocClientStatus]int)
	var order, extra []string
	for _, tg := range j.GetTaskGroups() {
		order = append(order, tg.GetName())
		counts[tg.GetName()] = make(map[droverv1.AllocClientStatus]int)
	}
	for _, a := range allocs {
		tg := a.GetTaskGroup()
		if counts[tg] == nil {
			counts[tg] = make(map[droverv1.AllocClientStatus]int)
			extra = append(extra, tg)
		}
		counts[tg][a.GetClientStatus()]++
	}
	slices.Sort(extra)
	fmt.Fprintln(w, "\nSummary")
	tw := newTable(w)
	fmt.Fprintln(tw, "Task Group\tDesired\tPending\tRunning\tComplete\tFailed\tLost\tUnknown")
	for _, name := range append(order, extra...) {
		desired := "-"
		if tg := j.LookupTaskGroup(name); tg != nil {
			desired = strconv.Itoa(int(tg.GetCount()))
		}
		fmt.Fprintf(tw, "%s\t%s", name, desired)
		// The columns: pending, running, complete, failed, lost, unknown.
		for st := droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING; st <= droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN; st++ {
			fmt.Fprintf(tw, "\t%d", counts[name][st])
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// printLatestEvals writes the newest evaluations of the job, evals sorted
// newest first.
func (v jobView) printLatestEvals(w io.Writer, evals []*droverv1.Evaluation) error {
	fmt.Fprintln(w, "\nLatest Evaluations")
	if len(evals) == 0 {
		_, err := fmt.Fprintln(w, "No evaluations")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tTriggered By\tStatus\tCreated\tPlacement Failures")
	for _, ev := range evals[:min(len(evals), latestEvals)] {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.id(ev.GetId()), enumName(ev.GetTriggeredBy()),
			enumName(ev.GetStatus()), formatAgo(ev.GetCreateTime(), v.now), failureSummary(ev))
	}
	return tw.Flush()
}

// printAllocs writes the job's allocations, newest first.
func (v jobView) printAllocs(w io.Writer) error {
	fmt.Fprintln(w, "\nAllocations")
	if len(v.allocs) == 0 {
		_, err := fmt.Fprintln(w, "No allocations placed")
		return err
	}
	allocs := slices.Clone(v.allocs)
	slices.SortStableFunc(allocs, func(a, b *droverv1.Allocation) int {
		return cmp.Or(cmp.Compare(b.GetCreateIndex(), a.GetCreateIndex()), strings.Compare(a.GetId(), b.GetId()))
	})
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tNode ID\tTask Group\tVersion\tDesired\tStatus\tCreated")
	for _, a := range allocs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", v.id(a.GetId()), v.id(a.GetNodeId()), a.GetTaskGroup(),
			a.GetJobVersion(), enumName(a.GetDesiredStatus()), enumName(a.GetClientStatus()), formatAgo(a.GetCreateTime(), v.now))
	}
	return tw.Flush()
}
