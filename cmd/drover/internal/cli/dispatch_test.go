package cli

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestNormalizeArgs(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		want        []string
		wantCommand string
		wantErr     string
	}{
		{name: "flags first stay", args: []string{"job", "status", "-address", "X", "web"}, want: []string{"job", "status", "-address", "X", "web"}, wantCommand: "drover job status"},
		{name: "flags after the argument move before it", args: []string{"job", "status", "web", "-address", "X"}, want: []string{"job", "status", "-address", "X", "web"}, wantCommand: "drover job status"},
		{name: "flags on both sides", args: []string{"job", "stop", "-detach", "web", "-address=X", "-timeout", "5s"}, want: []string{"job", "stop", "-detach", "-address=X", "-timeout", "5s", "web"}},
		{name: "a boolean flag takes no value", args: []string{"job", "stop", "web", "-detach", "-json"}, want: []string{"job", "stop", "-detach", "-json", "web"}},
		{name: "double-dash flags", args: []string{"job", "status", "web", "--address", "X"}, want: []string{"job", "status", "--address", "X", "web"}},
		{name: "stdin as the file", args: []string{"job", "run", "-", "-detach"}, want: []string{"job", "run", "-detach", "-"}},
		{name: "-- ends the flags", args: []string{"job", "status", "-json", "--", "-odd-id"}, want: []string{"job", "status", "-json", "--", "-odd-id"}},
		{name: "-- after an argument", args: []string{"job", "status", "web", "--", "-odd-id"}, want: []string{"job", "status", "--", "web", "-odd-id"}},
		{name: "-h anywhere", args: []string{"job", "status", "web", "-h"}, want: []string{"job", "status", "-h", "web"}},
		{name: "a value that looks like a word", args: []string{"acl", "policy", "apply", "ops", "-description", "the ops team", "ops.hcl"}, want: []string{"acl", "policy", "apply", "-description", "the ops team", "ops", "ops.hcl"}},
		{name: "group alone", args: []string{"operator"}, want: []string{"operator"}, wantCommand: "drover operator"},
		{name: "subcommands ignore case as ffcli does", args: []string{"JOB", "Status"}, want: []string{"JOB", "Status"}, wantCommand: "drover job status"},
		{name: "unknown command", args: []string{"jbo", "status"}, wantCommand: "drover", wantErr: `unknown command "jbo" for "drover"; did you mean "job"?`},
		{name: "unknown subcommand", args: []string{"job", "stauts", "web"}, wantErr: `unknown command "stauts" for "drover job"; did you mean "status"?`},
		{name: "an abbreviation", args: []string{"depl", "list"}, wantErr: `did you mean "deployment"?`},
		{name: "nothing close", args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate" for "drover"`},
		{name: "a subcommand's word where a command's is", args: []string{"members"}, wantErr: `unknown command "members" for "drover"`},
		{name: "unknown flag", args: []string{"job", "status", "web", "-adress", "X"}, wantCommand: "drover job status", wantErr: `unknown flag -adress for "drover job status"; did you mean -address?`},
		{name: "unknown flag before the subcommand", args: []string{"job", "-address", "X", "status"}, wantErr: `unknown flag -address for "drover job"`},
		{name: "deprecated names are not suggested", args: []string{"server", "members", "-ca-fil", "x"}, wantErr: `did you mean -tls-ca-file?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line, err := normalizeArgs(Root(io.Discard, io.Discard), tt.args)
			if tt.wantErr != "" {
				if err == nil || !IsUsage(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want a usage error containing %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(line.args, tt.want) {
				t.Errorf("args %q, want %q", line.args, tt.want)
			}
			if tt.wantCommand != "" && line.command != tt.wantCommand {
				t.Errorf("command %q, want %q", line.command, tt.wantCommand)
			}
		})
	}
}

// TestCommandLineErrors is the table of the CLI's error cases as a user
// meets them: the exit code and what stderr says.
func TestCommandLineErrors(t *testing.T) {
	t.Setenv(addrEnv, "")
	dead := deadAddr(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		stderr   []string
	}{
		{"no command", nil, exitUsage, []string{"SUBCOMMANDS"}},
		{"-h", []string{"job", "status", "-h"}, exitUsage, []string{"USAGE", "drover job status"}},
		{"unknown command", []string{"jbo"}, exitUsage, []string{`error: unknown command "jbo" for "drover"; did you mean "job"?`, "Run 'drover -h' for usage."}},
		{"unknown subcommand", []string{"operator", "raft", "list-peer"}, exitUsage, []string{`did you mean "list-peers"?`, "Run 'drover operator raft -h' for usage."}},
		{"unknown flag", []string{"server", "members", "-adress", dead}, exitUsage, []string{"unknown flag -adress", "did you mean -address?", "Run 'drover server members -h' for usage."}},
		{"malformed flag value", []string{"server", "members", "-timeout", "soon"}, exitUsage, []string{`invalid value "soon" for flag -timeout`, "Run 'drover server members -h' for usage."}},
		{"unexpected argument", []string{"server", "members", "s1", "-address", dead}, exitUsage, []string{"error: unexpected arguments: s1", "Run 'drover server members -h' for usage."}},
		{"a command's own argument check", []string{"job", "status", "a", "b", "-address", dead}, exitUsage, []string{"error: give at most one job id, not 2", "Run 'drover job status -h' for usage."}},
		{"a flag out of range", []string{"agent", "-sim-nodes", "0", "-address", dead}, exitUsage, []string{"-sim-nodes 0: give a positive number of nodes"}},
		{"refused connection", []string{"server", "members", "-address", dead, "-timeout", "5s"}, 1, []string{"Error listing server members", causeRefused + " " + dead}},
		{"completion for an unknown shell", []string{"completion", "tcsh"}, exitUsage, []string{`no completion for shell "tcsh": want bash, zsh or fish`, "Run 'drover completion -h' for usage."}},
		{"job plan keeps its own code", []string{"job", "plan", "-address", dead}, planExitError, []string{"give exactly one job file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := Main(ctx, tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// TestFlagsAfterArguments runs a command with its flags after its argument
// against a server and checks what the server was asked.
func TestFlagsAfterArguments(t *testing.T) {
	t.Setenv(addrEnv, "")
	fake := &fakeScheduling{evals: []*droverv1.Evaluation{evalIn(droverv1.EvalStatus_EVAL_STATUS_PENDING, nil)}}
	addr := startScheduling(t, fake)
	_, stderr, err := run(t, "job", "stop", "web", "-detach", "-address", addr, "-request-id", "retry-1", "-timeout=5s")
	if err != nil {
		t.Fatalf("error %v; stderr:\n%s", err, stderr)
	}
	_, _, stop := fake.requests()
	if len(stop) != 1 || stop[0].GetJobId() != "web" || stop[0].GetRequestId() != "retry-1" {
		t.Fatalf("server was asked %v; want one stop of web with request id retry-1", stop)
	}
}
