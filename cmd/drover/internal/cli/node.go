package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// nodeCommand groups the commands that inspect nodes and take them out of
// (or back into) scheduling.
func nodeCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "node",
		ShortUsage: "drover node <subcommand> [flags]",
		ShortHelp:  "Inspect nodes; drain them or change their scheduling eligibility.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			nodeStatusCommand(stdout, stderr),
			nodeEligibilityCommand(stdout, stderr),
			nodeDrainCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

// resolveNode reads the node id names: a full id or a unique prefix, which
// the server resolves.
func resolveNode(ctx context.Context, s *session, id string) (*droverv1.GetNodeResponse, error) {
	return droverv1.NewNodeServiceClient(s.conn).Get(ctx, &droverv1.GetNodeRequest{NodeId: id})
}

// oneNodeID is the single node id a command was given.
func oneNodeID(args []string) (string, error) {
	if len(args) != 1 || args[0] == "" {
		return "", usageErrorf("give exactly one node id")
	}
	return args[0], nil
}

// enableFlags are the -enable and -disable flags of a command that switches
// something on or off; exactly one must be given.
type enableFlags struct{ enable, disable bool }

func (f *enableFlags) define(fs *flag.FlagSet, enableUsage, disableUsage string) {
	fs.BoolVar(&f.enable, "enable", false, enableUsage)
	fs.BoolVar(&f.disable, "disable", false, disableUsage)
}

// on is whether -enable was given, or an error unless exactly one of
// -enable and -disable was.
func (f *enableFlags) on() (bool, error) {
	if f.enable == f.disable {
		return false, usageErrorf("give exactly one of -enable and -disable")
	}
	return f.enable, nil
}

func nodeEligibilityCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover node eligibility", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var onOff enableFlags
	onOff.define(fs, "make the node eligible for new allocations", "make the node ineligible for new allocations")
	return &ffcli.Command{
		Name:       "eligibility",
		ShortUsage: "drover node eligibility [flags] (-enable | -disable) ID",
		ShortHelp:  "Let the scheduler place new allocations on a node, or stop it doing so.",
		LongHelp: "Mark a node eligible (-enable) or ineligible (-disable) for new\n" +
			"allocations. Allocations already on the node stay where they are: drain\n" +
			"the node to move them. A draining node cannot be made eligible; end the\n" +
			"drain with `drover node drain -disable`. ID may be a unique prefix of the\n" +
			"node id.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			eligible, err := onOff.on()
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
			return setEligibility(ctx, s, stdout, id, eligible)
		},
	}
}

// setEligibility resolves the node id names and sets its eligibility.
func setEligibility(ctx context.Context, s *session, w io.Writer, id string, eligible bool) error {
	got, err := resolveNode(ctx, s, id)
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("reading node %q", id), err)
	}
	nodeID := got.GetNode().GetId()
	want := droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
	if eligible {
		want = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE
	}
	resp, err := droverv1.NewNodeServiceClient(s.conn).UpdateEligibility(ctx,
		&droverv1.UpdateNodeEligibilityRequest{NodeId: nodeID, Eligibility: want})
	if err != nil {
		err = s.fail(ctx, fmt.Sprintf("setting the eligibility of node %q", nodeID), err)
		if eligible && status.Code(err) == codes.FailedPrecondition {
			fmt.Fprintf(s.stderr, "`drover node drain -disable %s` ends the drain and makes the node eligible.\n", shortID(nodeID))
		}
		return err
	}
	if s.opts.json {
		return printJSON(w, resp)
	}
	return printEligibilitySet(w, nodeID, want, resp)
}

// printEligibilitySet says what an eligibility change did, as the Nomad
// CLI does, then the evaluations it created.
func printEligibilitySet(w io.Writer, nodeID string, e droverv1.SchedulingEligibility, resp *droverv1.UpdateNodeEligibilityResponse) error {
	if resp.GetIndex() == 0 {
		fmt.Fprintf(w, "Node %q scheduling eligibility already set: %s for scheduling\n", nodeID, enumName(e))
	} else {
		fmt.Fprintf(w, "Node %q scheduling eligibility set: %s for scheduling\n", nodeID, enumName(e))
	}
	return printEvalIDs(w, resp.GetEvalIds())
}

// printEvalIDs writes one "Evaluation ID" line per evaluation a write
// created, as `job run -detach` does for its one.
func printEvalIDs(w io.Writer, ids []string) error {
	for _, id := range ids {
		if _, err := fmt.Fprintf(w, "Evaluation ID: %s\n", id); err != nil {
			return err
		}
	}
	return nil
}
