package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// operatorCommand groups the commands for operators of the cluster itself.
func operatorCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "operator",
		ShortUsage: "drover operator <subcommand> [flags]",
		ShortHelp:  "Operate the cluster's servers.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			operatorRaftCommand(stdout, stderr),
			operatorSchedulerCommand(stdout, stderr),
			operatorSnapshotCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

// operatorRaftCommand groups the commands on the raft configuration.
func operatorRaftCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator raft", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "raft",
		ShortUsage: "drover operator raft <subcommand> [flags]",
		ShortHelp:  "Inspect and change the raft configuration.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			raftListPeersCommand(stdout, stderr),
			raftRemovePeerCommand(stdout, stderr),
			raftTransferLeadershipCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

func raftListPeersCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator raft list-peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "list-peers",
		ShortUsage: "drover operator raft list-peers [flags]",
		ShortHelp:  "List the servers of the raft configuration.",
		LongHelp:   "List the servers of the raft configuration as the leader sees it.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := callOperator(ctx, opts, stderr, "listing raft peers",
				func(ctx context.Context, c droverv1.OperatorServiceClient) (*droverv1.RaftListPeersResponse, error) {
					return c.RaftListPeers(ctx, &droverv1.RaftListPeersRequest{})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			tw := newTable(stdout)
			fmt.Fprintln(tw, "Node\tAddress\tRPC Address\tState\tVoter\tLast Index")
			for _, p := range resp.GetPeers() {
				state := "follower"
				if p.GetLeader() {
					state = "leader"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%d\n",
					p.GetId(), p.GetAddress(), p.GetRpcAddr(), state, p.GetVoter(), p.GetLastIndex())
			}
			return tw.Flush()
		},
	}
}

func raftRemovePeerCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator raft remove-peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var id, peerAddr string
	fs.StringVar(&id, "id", "", "raft id of the server to remove")
	fs.StringVar(&peerAddr, "peer-address", "", "raft address of the server to remove (host:port)")
	return &ffcli.Command{
		Name:       "remove-peer",
		ShortUsage: "drover operator raft remove-peer [flags] (-id ID | -peer-address RAFTADDR)",
		ShortHelp:  "Remove a server from the raft configuration.",
		LongHelp: "Remove a server from the raft configuration, by raft id (-id) or by raft\n" +
			"address (-peer-address); give exactly one. The leader cannot remove itself:\n" +
			"run `drover operator raft transfer-leadership` first. -address is, as on\n" +
			"every command, the gRPC address of the server to ask.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if (id == "") == (peerAddr == "") {
				fs.Usage()
				return usageErrorf("give exactly one of -id and -peer-address")
			}
			req := &droverv1.RaftRemovePeerRequest{Id: id, Address: peerAddr}
			resp, err := callOperator(ctx, opts, stderr, "removing raft peer",
				func(ctx context.Context, c droverv1.OperatorServiceClient) (*droverv1.RaftRemovePeerResponse, error) {
					return c.RaftRemovePeer(ctx, req)
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			switch {
			case resp.GetId() != "":
				_, err = fmt.Fprintf(stdout, "Removed peer with id %s\n", resp.GetId())
			case id != "":
				_, err = fmt.Fprintf(stdout, "Removed peer with id %s\n", id)
			default:
				_, err = fmt.Fprintf(stdout, "Removed peer with address %s\n", peerAddr)
			}
			return err
		},
	}
}

func raftTransferLeadershipCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator raft transfer-leadership", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var id string
	fs.StringVar(&id, "id", "", "raft id of the voter to hand leadership to (default: the most up to date one)")
	return &ffcli.Command{
		Name:       "transfer-leadership",
		ShortUsage: "drover operator raft transfer-leadership [flags]",
		ShortHelp:  "Hand raft leadership to another voter.",
		LongHelp: "Ask the leader to hand leadership to another voter: the one named by -id,\n" +
			"or else the most up to date one. Prints the new leader.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := callOperator(ctx, opts, stderr, "transferring leadership",
				func(ctx context.Context, c droverv1.OperatorServiceClient) (*droverv1.RaftTransferLeadershipResponse, error) {
					return c.RaftTransferLeadership(ctx, &droverv1.RaftTransferLeadershipRequest{Id: id})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			if resp.GetLeaderId() == "" {
				_, err = fmt.Fprintln(stdout, "Transferred leadership; the new leader is not known yet")
				return err
			}
			_, err = fmt.Fprintf(stdout, "Transferred leadership to %s\n", resp.GetLeaderId())
			return err
		},
	}
}
