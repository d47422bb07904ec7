package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Main runs the drover command line args and returns the process's exit
// code: 0 on success; the code a command chose (ExitCodeError); 2 for -h
// and usage errors; else 1. What went wrong is on stderr, once.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return exitCode(Run(ctx, Root(stdout, stderr), args), stderr)
}

// exitCode turns a command's error into an exit code, printing the error
// unless the command has already done so.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code, chosen := ExitCode(err)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// The flag package or ffcli has printed the usage.
		return exitUsage
	case Reported(err):
	case IsUsage(err):
		fmt.Fprintln(stderr, "error:", err)
		var u *UsageError
		if errors.As(err, &u) && u.Command != "" {
			fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", u.Command)
		}
		if !chosen {
			code = exitUsage
		}
	default:
		fmt.Fprintln(stderr, "error:", err)
	}
	if !chosen && code == 0 {
		code = 1
	}
	return code
}
