package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// defaultDrainDeadline bounds a drain whose operator named no deadline, so
// that a group whose replacements cannot be placed does not hold the node
// forever (Nomad's default too).
const defaultDrainDeadline = time.Hour

// drainFlags are the flags of `node drain`.
type drainFlags struct {
	enableFlags
	deadline       time.Duration // set by -deadline, else zero
	noDeadline     bool
	force          bool
	ignoreSystem   bool
	keepIneligible bool
	detach         bool
}

func (f *drainFlags) define(fs *flag.FlagSet) {
	f.enableFlags.define(fs, "start draining the node", "end the node's drain")
	fs.Func("deadline", "with -enable: after this long, move everything still on the node at once (default 1h)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("must be positive (-no-deadline waits for ever, -force moves everything now)")
		}
		f.deadline = d
		return nil
	})
	fs.BoolVar(&f.noDeadline, "no-deadline", false, "with -enable: no deadline; groups leave at their migrate max_parallel however long it takes")
	fs.BoolVar(&f.force, "force", false, "with -enable: move every allocation now, ignoring the groups' migrate max_parallel")
	fs.BoolVar(&f.ignoreSystem, "ignore-system", false, "with -enable: leave the allocations of system jobs on the node")
	fs.BoolVar(&f.keepIneligible, "keep-ineligible", false, "with -disable: leave the node ineligible for scheduling")
	fs.BoolVar(&f.detach, "detach", false, "with -enable: return once the drain has started instead of following it")
}

// request turns the flags into the drain change to ask for, its node id
// still to fill in, naming the flag that is wrong when one is.
func (f *drainFlags) request() (*droverv1.UpdateNodeDrainRequest, error) {
	enable, err := f.on()
	if err != nil {
		return nil, err
	}
	deadlines := 0
	for _, set := range []bool{f.deadline != 0, f.noDeadline, f.force} {
		if set {
			deadlines++
		}
	}
	switch {
	case deadlines > 1:
		return nil, usageErrorf("give at most one of -deadline, -no-deadline and -force")
	case !enable && deadlines > 0:
		return nil, errors.New("-deadline, -no-deadline and -force go with -enable")
	case !enable && f.ignoreSystem:
		return nil, errors.New("-ignore-system goes with -enable")
	case enable && f.keepIneligible:
		return nil, errors.New("-keep-ineligible goes with -disable")
	}
	req := &droverv1.UpdateNodeDrainRequest{
		Enable:           enable,
		Force:            f.force,
		IgnoreSystemJobs: f.ignoreSystem,
		MarkEligible:     !enable && !f.keepIneligible,
	}
	switch {
	case !enable, f.noDeadline, f.force:
	case f.deadline != 0:
		req.Deadline = durationpb.New(f.deadline)
	default:
		req.Deadline = durationpb.New(defaultDrainDeadline)
	}
	return req, nil
}

func nodeDrainCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover node drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, false)
	var f drainFlags
	f.define(fs)
	return &ffcli.Command{
		Name:       "drain",
		ShortUsage: "drover node drain [flags] (-enable | -disable) ID",
		ShortHelp:  "Move every allocation off a node, or end a drain.",
		LongHelp: "-enable starts draining a node: it becomes ineligible for new allocations\n" +
			"and its allocations are moved elsewhere in turns: at most a group's migrate\n" +
			"max_parallel (default 1) of a service group at a time, each turn once the\n" +
			"replacements of the last are running. Batch work is left to finish, and\n" +
			"system work leaves last, unless -ignore-system keeps it. At the deadline\n" +
			"(-deadline, 1h by default) everything still there moves at once; -force\n" +
			"moves everything now. When none is left the drain is\n" +
			"complete and the node stays ineligible. Unless -detach, the command follows\n" +
			"the drain, printing how many allocations are still running on the node,\n" +
			"until it completes; -timeout and Ctrl-C stop following, the drain carries\n" +
			"on. -disable ends a drain and makes the node eligible again, unless\n" +
			"-keep-ineligible. ID may be a unique prefix of the node id.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			req, err := f.request()
			if err != nil {
				fs.Usage()
				return asUsage(err)
			}
			id, err := oneNodeID(args)
			if err != nil {
				fs.Usage()
				return asUsage(err)
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			got, err := resolveNode(ctx, s, id)
			if err != nil {
				return s.fail(ctx, fmt.Sprintf("reading node %q", id), err)
			}
			req.NodeId = got.GetNode().GetId()
			resp, err := droverv1.NewNodeServiceClient(s.conn).UpdateDrain(ctx, req)
			if err != nil {
				return s.fail(ctx, drainDoing(req), err)
			}
			if err := printDrainSet(stdout, req, resp); err != nil {
				return err
			}
			if !req.GetEnable() || f.detach {
				return nil
			}
			return followDrain(ctx, s, stdout, req.GetNodeId(), resp.GetIndex())
		},
	}
}

// drainDoing says what a drain request was doing, for its error.
func drainDoing(req *droverv1.UpdateNodeDrainRequest) string {
	if req.GetEnable() {
		return fmt.Sprintf("starting the drain of node %q", req.GetNodeId())
	}
	return fmt.Sprintf("ending the drain of node %q", req.GetNodeId())
}

// printDrainSet says what a drain change did, as the Nomad CLI does, then
// the evaluations it created.
func printDrainSet(w io.Writer, req *droverv1.UpdateNodeDrainRequest, resp *droverv1.UpdateNodeDrainResponse) error {
	id := req.GetNodeId()
	switch {
	case req.GetEnable() && resp.GetIndex() == 0:
		fmt.Fprintf(w, "Node %q drain strategy already set\n", id)
	case req.GetEnable():
		fmt.Fprintf(w, "Node %q drain strategy set\n", id)
	case resp.GetIndex() == 0:
		fmt.Fprintf(w, "Node %q was not draining; nothing changed\n", id)
	default:
		fmt.Fprintf(w, "Node %q drain strategy unset\n", id)
		if req.GetMarkEligible() {
			fmt.Fprintf(w, "Node %q scheduling eligibility set: eligible for scheduling\n", id)
		}
	}
	return printEvalIDs(w, resp.GetEvalIds())
}
