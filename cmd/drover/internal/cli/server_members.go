package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// withServerSubcommands adds the client subcommands of `drover server` to
// the command serverCommand builds, which itself runs a server.
func withServerSubcommands(server *ffcli.Command, stdout, stderr io.Writer) *ffcli.Command {
	server.Subcommands = append(server.Subcommands, serverMembersCommand(stdout, stderr))
	return server
}

func serverMembersCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover server members", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "members",
		ShortUsage: "drover server members [flags]",
		ShortHelp:  "List the servers with their raft state and health.",
		LongHelp: "List every server with its version, raft state and health as the leader's\n" +
			"autopilot sees them, the cluster's id, and whether the cluster as a whole is healthy.\n" +
			"Exits 1 when the cluster is unhealthy (autopilot's verdict, the \"Cluster healthy\" line),\n" +
			"naming the unhealthy servers on stderr.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := callOperator(ctx, opts, stderr, "listing server members",
				func(ctx context.Context, c droverv1.OperatorServiceClient) (*droverv1.ServerMembersResponse, error) {
					return c.ServerMembers(ctx, &droverv1.ServerMembersRequest{})
				})
			if err != nil {
				return err
			}
			if opts.json {
				if err := printJSON(stdout, resp); err != nil {
					return err
				}
				return clusterHealthError(stderr, resp)
			}
			tw := newTable(stdout)
			fmt.Fprintln(tw, "ID\tRPC Address\tRaft Address\tVersion\tRaft State\tVoter\tLeader\tHealthy\tLast Index")
			for _, s := range resp.GetServers() {
				version := s.GetVersion()
				if version == "" {
					version = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%t\t%t\t%d\n",
					s.GetId(), s.GetRpcAddr(), s.GetRaftAddr(), version, raftStateName(s.GetRaftState()),
					s.GetVoter(), s.GetLeader(), s.GetHealthy(), s.GetLastIndex())
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			clusterID := resp.GetClusterId()
			if clusterID == "" {
				clusterID = "- (not written yet)"
			}
			if _, err := fmt.Fprintf(stdout, "\nCluster ID: %s\nCluster healthy: %t, failure tolerance: %d\n", clusterID, resp.GetHealthy(), resp.GetFailureTolerance()); err != nil {
				return err
			}
			return clusterHealthError(stderr, resp)
		},
	}
}

// raftStateName is the lower-case word for a raft state, as tables show it.
func raftStateName(s droverv1.RaftState) string {
	switch s {
	case droverv1.RaftState_RAFT_STATE_FOLLOWER:
		return "follower"
	case droverv1.RaftState_RAFT_STATE_CANDIDATE:
		return "candidate"
	case droverv1.RaftState_RAFT_STATE_LEADER:
		return "leader"
	case droverv1.RaftState_RAFT_STATE_SHUTDOWN:
		return "shutdown"
	}
	return "unknown"
}
