package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/droverhq/drover/internal/testserver"
	"github.com/droverhq/drover/server"
)

// TestACLCommandsAgainstServer bootstraps ACLs, writes a policy from a
// file, creates, shows, updates and deletes a token, and calls with
// -token and with DROVER_TOKEN, against a server with -acl-enabled.
func TestACLCommandsAgainstServer(t *testing.T) {
	t.Setenv(addrEnv, "")
	t.Setenv(tokenEnv, "")
	srv := testserver.Start(t, func(c *server.Config) { c.ACLEnabled = true })
	addr := srv.RPCAddr()
	mustRun := func(args ...string) string {
		t.Helper()
		out, stderr, err := run(t, withAddr(addr, args[:min(len(args), 3)], args[min(len(args), 3):]...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, out, stderr)
		}
		return out
	}
	secretRE := regexp.MustCompile(`Secret ID\s+= (\S+)`)
	boot := mustRun("acl", "bootstrap")
	m := secretRE.FindStringSubmatch(boot)
	if m == nil || !regexp.MustCompile(`Type\s+= management`).MatchString(boot) {
		t.Fatalf("acl bootstrap printed:\n%s", boot)
	}
	mgmt := m[1]

	// Without a token the server refuses, naming the capability.
	_, stderr, err := run(t, withAddr(addr, []string{"node", "status"})...)
	if err == nil || !strings.Contains(stderr, "PermissionDenied") || !strings.Contains(stderr, "node") {
		t.Errorf("node status without a token: %v\n%s", err, stderr)
	}

	rules := filepath.Join(t.TempDir(), "readers.hcl")
	if err := os.WriteFile(rules, []byte("node { policy = \"read\" }\njob \"web-*\" { policy = \"read\" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRun("acl", "policy", "apply", "-token", mgmt, "-description", "read nodes", "readers", rules); !strings.Contains(out, `Policy "readers" applied`) {
		t.Errorf("acl policy apply:\n%s", out)
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(bad, []byte("node {\n  policy = \"admin\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = run(t, withAddr(addr, []string{"acl", "policy", "apply"}, "-token", mgmt, "bad", bad)...)
	if err == nil || !strings.Contains(stderr, "bad.hcl:2") || !strings.Contains(stderr, "InvalidArgument") {
		t.Errorf("acl policy apply of a bad policy: %v\n%s", err, stderr)
	}
	if out := mustRun("acl", "policy", "info", "-token", mgmt, "readers"); !strings.Contains(out, "read nodes") || !strings.Contains(out, `job "web-*"`) {
		t.Errorf("acl policy info:\n%s", out)
	}

	created := mustRun("acl", "token", "create", "-token", mgmt, "-name", "ci", "-policy", "readers")
	m = secretRE.FindStringSubmatch(created)
	if m == nil {
		t.Fatalf("acl token create printed:\n%s", created)
	}
	reader := m[1]
	// DROVER_TOKEN is the token when -token is not given.
	t.Setenv(tokenEnv, reader)
	self := mustRun("acl", "token", "self", "-json")
	var resp struct {
		Token struct {
			AccessorID string   `json:"accessor_id"`
			Name       string   `json:"name"`
			Policies   []string `json:"policies"`
		} `json:"token"`
	}
	if err := json.Unmarshal([]byte(self), &resp); err != nil || resp.Token.Name != "ci" || len(resp.Token.Policies) != 1 {
		t.Fatalf("acl token self -json: %v\n%s", err, self)
	}
	mustRun("node", "status")
	_, stderr, err = run(t, withAddr(addr, []string{"system", "gc"})...)
	if err == nil || !strings.Contains(stderr, "PermissionDenied") {
		t.Errorf("system gc with a reader token: %v\n%s", err, stderr)
	}
	t.Setenv(tokenEnv, "")

	if out := mustRun("acl", "token", "update", "-token", mgmt, "-name", "ci-renamed", "-policy", "readers", resp.Token.AccessorID); !strings.Contains(out, "ci-renamed") {
		t.Errorf("acl token update:\n%s", out)
	}
	if out := mustRun("acl", "token", "list", "-token", mgmt); !strings.Contains(out, "ci-renamed") || !strings.Contains(out, "Bootstrap Token") || strings.Contains(out, reader) {
		t.Errorf("acl token list (it must never show a secret):\n%s", out)
	}
	mustRun("acl", "token", "delete", "-token", mgmt, resp.Token.AccessorID)
	_, stderr, err = run(t, withAddr(addr, []string{"acl", "token", "self"}, "-token", reader)...)
	if err == nil || !strings.Contains(stderr, "Unauthenticated") {
		t.Errorf("a deleted token: %v\n%s", err, stderr)
	}
}
