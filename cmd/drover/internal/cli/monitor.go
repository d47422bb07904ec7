package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// followPollWait is the longest one blocking read of a followed evaluation
// waits before asking again; -timeout and Ctrl-C end the follow sooner.
const followPollWait = time.Minute

// followEval waits for evaluation id to leave pending, then prints how it
// ended, why allocations could not be placed, and per task group what it
// placed, stopped and left queued. groups are task groups to list even
// when the evaluation did nothing to them. -timeout and Ctrl-C end the wait;
// the evaluation itself carries on.
func followEval(ctx context.Context, s *session, stdout io.Writer, id string, groups []string) error {
	fmt.Fprintf(stdout, "==> Monitoring evaluation %q\n", shortID(id))
	waitCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	ev, err := awaitEval(waitCtx, droverv1.NewEvalServiceClient(s.conn), id)
	if err != nil {
		switch {
		case s.timedOut(ctx) > 0:
			// The server answered; the evaluation is what took too long.
			err = fmt.Errorf("still pending after -timeout %s", s.opts.timeout)
		case ctx.Err() == nil && waitCtx.Err() != nil:
			err = context.Cause(waitCtx) // Ctrl-C
		}
		err = report(s.stderr, "following evaluation "+id, err, 0)
		fmt.Fprintf(s.stderr, "The evaluation carries on: `drover eval status %s` shows how it ends.\n", shortID(id))
		return err
	}
	printEvalOutcome(stdout, ev)
	allocs, _, err := jobAllocs(ctx, s, ev.GetJobId())
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("listing allocations of job %q", ev.GetJobId()), err)
	}
	if err := printEvalPlacements(stdout, ev, allocs, groups); err != nil {
		return err
	}
	if ev.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_FAILED {
		return report(s.stderr, fmt.Sprintf("scheduling job %q", ev.GetJobId()),
			fmt.Errorf("evaluation %s failed: %s", id, orNone(ev.GetStatusDescription())), 0)
	}
	return nil
}

// awaitEval reads evaluation id with blocking queries until it is no
// longer pending.
func awaitEval(ctx context.Context, c droverv1.EvalServiceClient, id string) (*droverv1.Evaluation, error) {
	var index uint64
	for {
		resp, err := c.Get(ctx, &droverv1.GetEvaluationRequest{
			EvalId: id,
			Query:  &droverv1.QueryOptions{MinIndex: index, MaxWait: durationpb.New(followPollWait)},
		})
		if err != nil {
			return nil, err
		}
		if ev := resp.GetEvaluation(); ev.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_PENDING {
			return ev, nil
		}
		// At least 1, so that the next read blocks rather than spins.
		index = max(index, resp.GetMeta().GetIndex(), 1)
	}
}

// printEvalOutcome writes the line saying how an evaluation ended and, as
// the Nomad CLI does, why it could not place everything.
func printEvalOutcome(w io.Writer, ev *droverv1.Evaluation) {
	line := fmt.Sprintf("==> Evaluation %q finished with status %q", shortID(ev.GetId()), enumName(ev.GetStatus()))
	if desc := ev.GetStatusDescription(); desc != "" && ev.GetStatus() != droverv1.EvalStatus_EVAL_STATUS_COMPLETE {
		line += fmt.Sprintf(" (%s)", desc)
	}
	failures := ev.GetPlacementFailures()
	if len(failures) == 0 {
		fmt.Fprintln(w, line)
		return
	}
	fmt.Fprintln(w, line+" but failed to place all allocations:")
	for _, pf := range failures {
		printPlacementFailure(w, "    ", pf, false)
	}
	if ev.GetBlockedEval() != "" {
		fmt.Fprintf(w, "    Evaluation %q waiting for additional capacity to place remainder\n", shortID(ev.GetBlockedEval()))
	}
}

// groupPlacements is what one evaluation did to one task group.
type groupPlacements struct {
	placed, stopped, queued int
}

// printEvalPlacements writes per task group the allocations the
// evaluation placed (it last changed them and they should run), stopped,
// and left queued. Task groups in groups are listed even when nothing
// happened to them; others only when something did.
func printEvalPlacements(w io.Writer, ev *droverv1.Evaluation, allocs []*droverv1.Allocation, groups []string) error {
	counts := make(map[string]*groupPlacements)
	order := slices.Clone(groups)
	row := func(tg string) *groupPlacements {
		c, ok := counts[tg]
		if !ok {
			c = &groupPlacements{}
			counts[tg] = c
			if !slices.Contains(groups, tg) {
				order = append(order, tg)
			}
		}
		return c
	}
	for _, tg := range groups {
		row(tg)
	}
	for _, a := range allocs {
		if a.GetEvalId() != ev.GetId() {
			continue
		}
		if a.GetDesiredStatus() == droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN {
			row(a.GetTaskGroup()).placed++
		} else {
			row(a.GetTaskGroup()).stopped++
		}
	}
	queued := ev.GetQueuedAllocations()
	for _, tg := range slices.Sorted(maps.Keys(queued)) {
		row(tg).queued += int(queued[tg])
	}
	if len(order) == 0 {
		return nil
	}
	slices.Sort(order[len(groups):])
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "    Task Group\tPlaced\tStopped\tQueued")
	for _, tg := range order {
		c := counts[tg]
		fmt.Fprintf(tw, "    %s\t%d\t%d\t%d\n", tg, c.placed, c.stopped, c.queued)
	}
	return tw.Flush()
}
