package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func aclTokenCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "token",
		ShortUsage: "drover acl token <create|list|info|update|delete|self> [flags]",
		ShortHelp:  "Manage ACL tokens.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			aclTokenCreateCommand(stdout, stderr),
			aclTokenListCommand(stdout, stderr),
			aclTokenInfoCommand(stdout, stderr, "info"),
			aclTokenUpdateCommand(stdout, stderr),
			aclTokenDeleteCommand(stdout, stderr),
			aclTokenInfoCommand(stdout, stderr, "self"),
		},
		Exec: groupExec(),
	}
}

func aclTokenCreateCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl token create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	name := fs.String("name", "", "what the token is for")
	typ := fs.String("type", "client", "client (the rules of its policies) or management (everything)")
	ttl := fs.Duration("ttl", 0, "how long the token works; 0 never expires")
	var policies stringList
	fs.Var(&policies, "policy", "a policy of a client token (repeatable)")
	return &ffcli.Command{
		Name:       "create",
		ShortUsage: "drover acl token create [flags]",
		ShortHelp:  "Create a token; its secret is printed once.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			t, err := parseTokenType(*typ)
			if err != nil {
				return err
			}
			req := &droverv1.CreateACLTokenRequest{Name: *name, Type: t, Policies: policies}
			if *ttl != 0 {
				req.Ttl = durationpb.New(*ttl)
			}
			resp, err := aclCall(ctx, opts, stderr, "creating a token",
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ACLTokenSecretResponse, error) {
					return c.CreateToken(ctx, req)
				})
			if err != nil {
				return err
			}
			return printSecretToken(stdout, opts, resp)
		},
	}
}

func parseTokenType(s string) (droverv1.ACLTokenType, error) {
	switch s {
	case "client":
		return droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT, nil
	case "management":
		return droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT, nil
	}
	return 0, fmt.Errorf("-type %q: want client or management", s)
}

func aclTokenListCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl token list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "list",
		ShortUsage: "drover acl token list [flags]",
		ShortHelp:  "List tokens (never their secrets).",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := aclCall(ctx, opts, stderr, "listing tokens",
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ListACLTokensResponse, error) {
					return c.ListTokens(ctx, &droverv1.ListACLTokensRequest{})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			tw := newTable(stdout)
			fmt.Fprintln(tw, "Accessor ID\tName\tType\tPolicies\tExpires")
			for _, t := range resp.GetTokens() {
				expires := "never"
				if e := t.GetExpirationTime(); e != nil {
					expires = formatTime(e.AsTime().UnixNano())
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.GetAccessorId(), t.GetName(), tokenType(t.GetType()), strings.Join(t.GetPolicies(), ","), expires)
			}
			return tw.Flush()
		},
	}
}

// aclTokenInfoCommand is info (a token by accessor id) or self (the
// caller's own).
func aclTokenInfoCommand(stdout, stderr io.Writer, name string) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl token "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	usage, short := "drover acl token info [flags] ACCESSOR_ID", "Show a token."
	if name == "self" {
		usage, short = "drover acl token self [flags]", "Show the token this command runs with (-token or DROVER_TOKEN)."
	}
	return &ffcli.Command{
		Name:       name,
		ShortUsage: usage,
		ShortHelp:  short,
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			want := 1
			if name == "self" {
				want = 0
			}
			if len(args) != want {
				return errors.New("usage: " + usage)
			}
			resp, err := aclCall(ctx, opts, stderr, "reading the token",
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ACLTokenResponse, error) {
					if name == "self" {
						return c.Self(ctx, &droverv1.ACLTokenSelfRequest{})
					}
					return c.GetToken(ctx, &droverv1.GetACLTokenRequest{AccessorId: args[0]})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			return printToken(stdout, resp.GetToken())
		},
	}
}

func aclTokenUpdateCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl token update", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	name := fs.String("name", "", "the token's new name")
	var policies stringList
	fs.Var(&policies, "policy", "the client token's policies, replacing the old ones (repeatable)")
	return &ffcli.Command{
		Name:       "update",
		ShortUsage: "drover acl token update [flags] ACCESSOR_ID",
		ShortHelp:  "Replace a token's name and policies; its secret, type and expiry stay.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one accessor id")
			}
			resp, err := aclCall(ctx, opts, stderr, "updating token "+args[0],
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ACLTokenResponse, error) {
					return c.UpdateToken(ctx, &droverv1.UpdateACLTokenRequest{AccessorId: args[0], Name: *name, Policies: policies})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			return printToken(stdout, resp.GetToken())
		},
	}
}

func aclTokenDeleteCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl token delete", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "delete",
		ShortUsage: "drover acl token delete [flags] ACCESSOR_ID",
		ShortHelp:  "Delete a token: every server refuses it once it applies the deletion.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one accessor id")
			}
			resp, err := aclCall(ctx, opts, stderr, "deleting token "+args[0],
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ACLWriteResponse, error) {
					return c.DeleteToken(ctx, &droverv1.DeleteACLTokenRequest{AccessorId: args[0]})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			_, err = fmt.Fprintf(stdout, "Token %s deleted at index %d\n", args[0], resp.GetIndex())
			return err
		},
	}
}
