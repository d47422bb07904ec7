package cli

import (
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

// deploymentCommand groups the commands that show and steer rollouts.
func deploymentCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover deployment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "deployment",
		ShortUsage: "drover deployment <subcommand> [flags]",
		ShortHelp:  "Show and steer the rollouts of job versions.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			deploymentListCommand(stdout, stderr),
			deploymentStatusCommand(stdout, stderr),
			deploymentWriteCommand(stdout, stderr, "promote", "Promote the canaries of a deployment once they are healthy.",
				"Promote the canaries of every group with canaries, or of the -group ones:\n"+
					"the rest of the rollout goes on. Refused unless every canary is healthy."),
			deploymentWriteCommand(stdout, stderr, "pause", "Hold a running deployment.",
				"Nothing more is placed or replaced until `drover deployment resume`."),
			deploymentWriteCommand(stdout, stderr, "resume", "Go on with a paused deployment.",
				"The progress deadline starts again from now."),
			deploymentWriteCommand(stdout, stderr, "fail", "Fail a deployment.",
				"With auto_revert, the job goes back to its latest stable version."),
		},
		Exec: groupExec(),
	}
}

func deploymentListCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover deployment list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	jobID := fs.String("job", "", "only the deployments of this job, newest first")
	return &ffcli.Command{
		Name:       "list",
		ShortUsage: "drover deployment list [flags]",
		ShortHelp:  "List deployments.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			c := droverv1.NewDeploymentServiceClient(s.conn)
			var meta *droverv1.QueryMeta
			list, err := allPages(ctx, func(ctx context.Context, token string) ([]*droverv1.Deployment, string, error) {
				resp, err := c.List(ctx, &droverv1.ListDeploymentsRequest{JobId: *jobID, Page: &droverv1.PageOptions{NextToken: token}})
				meta = resp.GetMeta()
				return resp.GetDeployments(), resp.GetNextToken(), err
			})
			if err != nil {
				return s.fail(ctx, "listing deployments", err)
			}
			if opts.json {
				return printJSON(stdout, &droverv1.ListDeploymentsResponse{Deployments: list, Meta: meta})
			}
			return printDeployments(stdout, list)
		},
	}
}

// printDeployments prints one line per deployment.
func printDeployments(w io.Writer, list []*droverv1.Deployment) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No deployments found")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tJob ID\tJob Version\tStatus\tDescription")
	for _, d := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", d.GetId(), d.GetJobId(), d.GetJobVersion(), d.GetStatus().Name(), d.GetStatusDescription())
	}
	return tw.Flush()
}

func deploymentStatusCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover deployment status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "status",
		ShortUsage: "drover deployment status [flags] ID",
		ShortHelp:  "Show a deployment and each group's progress.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one deployment id")
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			resp, err := droverv1.NewDeploymentServiceClient(s.conn).Get(ctx, &droverv1.GetDeploymentRequest{DeploymentId: args[0]})
			if err != nil {
				return s.fail(ctx, "reading deployment "+args[0], err)
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			return printDeployment(stdout, resp.GetDeployment())
		},
	}
}

// printDeployment prints a deployment and its groups' progress.
func printDeployment(w io.Writer, d *droverv1.Deployment) error {
	if err := printFields(w, []field{
		{"ID", d.GetId()},
		{"Job ID", d.GetJobId()},
		{"Job Version", strconv.FormatUint(d.GetJobVersion(), 10)},
		{"Status", d.GetStatus().Name()},
		{"Description", d.GetStatusDescription()},
	}); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printDeploymentGroups(w, d)
}

// printDeploymentGroups prints each group's progress, groups by name.
func printDeploymentGroups(w io.Writer, d *droverv1.Deployment) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "Task Group\tPromoted\tDesired\tCanaries\tPlaced\tHealthy\tUnhealthy\tProgress Deadline")
	for _, name := range slices.Sorted(maps.Keys(d.GetGroups())) {
		g := d.GetGroups()[name]
		promoted := "-"
		if g.GetDesiredCanaries() > 0 {
			promoted = strconv.FormatBool(g.GetPromoted())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", name, promoted, g.GetDesiredTotal(), g.GetDesiredCanaries(),
			g.GetPlacedAllocs(), g.GetHealthyAllocs(), g.GetUnhealthyAllocs(), formatTime(g.GetRequireProgressBy()))
	}
	return tw.Flush()
}

// deploymentWriteCommand is one of promote, pause, resume and fail.
func deploymentWriteCommand(stdout, stderr io.Writer, name, short, long string) *ffcli.Command {
	fs := flag.NewFlagSet("drover deployment "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var groups stringList
	if name == "promote" {
		fs.Var(&groups, "group", "promote only this group's canaries (repeatable)")
	}
	return &ffcli.Command{
		Name:       name,
		ShortUsage: "drover deployment " + name + " [flags] ID",
		ShortHelp:  short,
		LongHelp:   long,
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one deployment id")
			}
			id := args[0]
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			c := droverv1.NewDeploymentServiceClient(s.conn)
			var resp *droverv1.DeploymentWriteResponse
			switch name {
			case "promote":
				resp, err = c.Promote(ctx, &droverv1.PromoteDeploymentRequest{DeploymentId: id, Groups: groups})
			case "pause", "resume":
				resp, err = c.Pause(ctx, &droverv1.PauseDeploymentRequest{DeploymentId: id, Pause: name == "pause"})
			case "fail":
				resp, err = c.Fail(ctx, &droverv1.FailDeploymentRequest{DeploymentId: id})
			}
			if err != nil {
				return s.fail(ctx, fmt.Sprintf("%s of deployment %s", name, id), err)
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			fmt.Fprintf(stdout, "Deployment %s: %s done\n", id, name)
			if resp.RevertedToVersion != nil {
				fmt.Fprintf(stdout, "Job reverted to version %d\n", resp.GetRevertedToVersion())
			}
			if resp.GetEvalId() != "" {
				fmt.Fprintf(stdout, "Evaluation ID: %s\n", resp.GetEvalId())
			}
			return nil
		},
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
