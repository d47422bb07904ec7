package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// listJSON runs ip -j with args and decodes its output into v. ip prints
// nothing at all for an empty list of namespaces.
func (n *network) listJSON(v any, args ...string) error {
	out, err := n.run("", nil, append([]string{"-j"}, args...)...)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("ip -j %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// batch runs cmds as one ip -batch in namespace ns (the root namespace if
// ns is empty), trying every command even after one fails.
func (n *network) batch(ns string, cmds []string) error {
	if len(cmds) == 0 {
		return nil
	}
	_, err := n.run(ns, []byte(strings.Join(cmds, "\n")+"\n"), "-force", "-batch", "-")
	return err
}

// ipError is a failed run of the ip command.
type ipError struct {
	args []string
	out  string
	err  error
}

func (e *ipError) Error() string {
	return fmt.Sprintf("ip %s: %v: %s", strings.Join(e.args, " "), e.err, strings.TrimSpace(e.out))
}

func (e *ipError) Unwrap() error { return e.err }

// denied reports whether the kernel refused the harness the privilege
// (no CAP_NET_ADMIN or CAP_SYS_ADMIN, as in an unprivileged container).
func (e *ipError) denied() bool {
	return strings.Contains(e.out, "Operation not permitted") || strings.Contains(e.out, "Permission denied")
}

// deniedAsUnsupported marks a refusal by the kernel as errNetnsUnsupported.
func deniedAsUnsupported(err error) error {
	var ipErr *ipError
	if errors.As(err, &ipErr) && ipErr.denied() {
		return fmt.Errorf("%w: %w", errNetnsUnsupported, err)
	}
	return err
}

// run runs ip with args in namespace ns (the root namespace if empty),
// with stdin as its input.
func (n *network) run(ns string, stdin []byte, args ...string) ([]byte, error) {
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ipTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.ipPath, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
		args = append(args, "<<", strings.ReplaceAll(strings.TrimSpace(string(stdin)), "\n", "; "))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, &ipError{args: args, out: stderr.String() + stdout.String(), err: err}
	}
	return stdout.Bytes(), nil
}
