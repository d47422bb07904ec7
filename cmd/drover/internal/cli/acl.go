package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// aclCommand groups the access control commands.
func aclCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "acl",
		ShortUsage: "drover acl <subcommand> [flags]",
		ShortHelp:  "Manage access control: the bootstrap token, policies and tokens.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			aclBootstrapCommand(stdout, stderr),
			aclPolicyCommand(stdout, stderr),
			aclTokenCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

// aclCall runs one ACLService call in a session and reports its failure.
func aclCall[Resp any](ctx context.Context, opts *clientOptions, stderr io.Writer, doing string,
	call func(context.Context, droverv1.ACLServiceClient) (Resp, error)) (Resp, error) {
	var zero Resp
	ctx, s, closeSession, err := openSession(ctx, opts, stderr)
	if err != nil {
		return zero, err
	}
	defer closeSession()
	resp, err := call(ctx, droverv1.NewACLServiceClient(s.conn))
	if err != nil {
		return zero, s.fail(ctx, doing, err)
	}
	return resp, nil
}

func aclBootstrapCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl bootstrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "bootstrap",
		ShortUsage: "drover acl bootstrap [flags]",
		ShortHelp:  "Create the first management token, once per cluster.",
		LongHelp: "Prints the token's secret: keep it, it is never shown again. A second\n" +
			"bootstrap is refused; docs/security.md says how to reset a lost token.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := aclCall(ctx, opts, stderr, "bootstrapping ACLs",
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ACLTokenSecretResponse, error) {
					return c.Bootstrap(ctx, &droverv1.ACLBootstrapRequest{})
				})
			if err != nil {
				return err
			}
			return printSecretToken(stdout, opts, resp)
		},
	}
}

// printSecretToken prints a new token with its secret.
func printSecretToken(w io.Writer, opts *clientOptions, resp *droverv1.ACLTokenSecretResponse) error {
	if opts.json {
		return printJSON(w, resp)
	}
	return printToken(w, resp.GetToken(), field{"Secret ID", resp.GetSecretId()})
}

// printToken prints a token's fields, then extra ones (a new token's
// secret).
func printToken(w io.Writer, t *droverv1.ACLToken, extra ...field) error {
	expires := "never"
	if e := t.GetExpirationTime(); e != nil {
		expires = e.AsTime().Local().Format(time.RFC3339)
	}
	return printFields(w, append([]field{
		{"Accessor ID", t.GetAccessorId()},
		{"Name", t.GetName()},
		{"Type", tokenType(t.GetType())},
		{"Policies", strings.Join(t.GetPolicies(), ",")},
		{"Create Time", t.GetCreateTime().AsTime().Local().Format(time.RFC3339)},
		{"Expires", expires},
	}, extra...))
}

func tokenType(t droverv1.ACLTokenType) string {
	switch t {
	case droverv1.ACLTokenType_ACL_TOKEN_TYPE_CLIENT:
		return "client"
	case droverv1.ACLTokenType_ACL_TOKEN_TYPE_MANAGEMENT:
		return "management"
	}
	return "unknown"
}

func aclPolicyCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "policy",
		ShortUsage: "drover acl policy <apply|list|info|delete> [flags]",
		ShortHelp:  "Manage ACL policies.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			aclPolicyApplyCommand(stdout, stderr),
			aclPolicyListCommand(stdout, stderr),
			aclPolicyInfoCommand(stdout, stderr),
			aclPolicyDeleteCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

func aclPolicyApplyCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl policy apply", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	description := fs.String("description", "", "what the policy is for")
	return &ffcli.Command{
		Name:       "apply",
		ShortUsage: "drover acl policy apply [flags] NAME FILE",
		ShortHelp:  "Create or replace a policy from a rules file (HCL or JSON; - reads stdin).",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 2 {
				return usageErrorf("give a policy name and a rules file")
			}
			rules, err := readFileOrStdin(args[1])
			if err != nil {
				return err
			}
			p := &droverv1.ACLPolicy{Name: args[0], Description: *description, Rules: string(rules)}
			resp, err := aclCall(ctx, opts, stderr, "applying policy "+args[0],
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ACLWriteResponse, error) {
					return c.ApplyPolicy(ctx, &droverv1.ApplyACLPolicyRequest{Policy: p})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			_, err = fmt.Fprintf(stdout, "Policy %q applied at index %d\n", args[0], resp.GetIndex())
			return err
		},
	}
}

// readFileOrStdin reads path, or standard input for "-".
func readFileOrStdin(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

func aclPolicyListCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl policy list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "list",
		ShortUsage: "drover acl policy list [flags]",
		ShortHelp:  "List policies.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			resp, err := aclCall(ctx, opts, stderr, "listing policies",
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ListACLPoliciesResponse, error) {
					return c.ListPolicies(ctx, &droverv1.ListACLPoliciesRequest{})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			if len(resp.GetPolicies()) == 0 {
				_, err := fmt.Fprintln(stdout, "No policies found")
				return err
			}
			tw := newTable(stdout)
			fmt.Fprintln(tw, "Name\tDescription")
			for _, p := range resp.GetPolicies() {
				fmt.Fprintf(tw, "%s\t%s\n", p.GetName(), p.GetDescription())
			}
			return tw.Flush()
		},
	}
}

func aclPolicyInfoCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl policy info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "info",
		ShortUsage: "drover acl policy info [flags] NAME",
		ShortHelp:  "Show a policy and its rules.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one policy name")
			}
			resp, err := aclCall(ctx, opts, stderr, "reading policy "+args[0],
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.GetACLPolicyResponse, error) {
					return c.GetPolicy(ctx, &droverv1.GetACLPolicyRequest{Name: args[0]})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			p := resp.GetPolicy()
			if err := printFields(stdout, []field{{"Name", p.GetName()}, {"Description", p.GetDescription()}}); err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "Rules\n\n%s\n", strings.TrimRight(p.GetRules(), "\n"))
			return err
		},
	}
}

func aclPolicyDeleteCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover acl policy delete", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	return &ffcli.Command{
		Name:       "delete",
		ShortUsage: "drover acl policy delete [flags] NAME",
		ShortHelp:  "Delete a policy; tokens naming it lose its rules.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one policy name")
			}
			resp, err := aclCall(ctx, opts, stderr, "deleting policy "+args[0],
				func(ctx context.Context, c droverv1.ACLServiceClient) (*droverv1.ACLWriteResponse, error) {
					return c.DeletePolicy(ctx, &droverv1.DeleteACLPolicyRequest{Name: args[0]})
				})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(stdout, resp)
			}
			_, err = fmt.Fprintf(stdout, "Policy %q deleted\n", args[0])
			return err
		},
	}
}
