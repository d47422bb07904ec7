package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestNodeAndSystemCommandsAgainstServer runs the node and system commands
// against a real server, with one node registered through the node API.
func TestNodeAndSystemCommandsAgainstServer(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t)
	addr := srv.RPCAddr()
	node := mock.Node()
	node.AgentVersion = "0.1.0"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	if _, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: node.CloneVT()}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{NodeId: node.GetId(), SecretId: node.GetSecretId(),
		Status: droverv1.NodeStatus_NODE_STATUS_READY}); err != nil {
		t.Fatal(err)
	}
	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		stdout, stderr, err := run(t, append(withAddr(addr, args[:2]), args[2:]...)...)
		if err != nil {
			t.Fatalf("%v: error %v; stderr:\n%s", args, err, stderr)
		}
		if stderr != "" {
			t.Errorf("%v: stderr %q", args, stderr)
		}
		return stdout
	}
	short := shortID(node.GetId())
	// nodeLine is the node's line of `node status`.
	nodeLine := func(t *testing.T) []string {
		t.Helper()
		out := mustRun(t, "node", "status")
		lines := linesOf(out)
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID Name DC Class Drain Eligibility Status" {
			t.Fatalf("stdout:\n%s", out)
		}
		return strings.Fields(lines[1])
	}
	wantLine := func(t *testing.T, drain, eligibility string) {
		t.Helper()
		want := []string{short, node.GetName(), "dc1", "standard", drain, eligibility, "ready"}
		if got := nodeLine(t); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("node line %q, want %q", got, want)
		}
	}

	t.Run("status lists the node", func(t *testing.T) {
		wantLine(t, "false", "eligible")
		var resp struct {
			Nodes []struct {
				ID       string `json:"id"`
				SecretID string `json:"secret_id"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, "node", "status", "-json")), &resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Nodes) != 1 || resp.Nodes[0].ID != node.GetId() || resp.Nodes[0].SecretID != "" {
			t.Errorf("nodes %+v", resp.Nodes)
		}
	})
	t.Run("status ID", func(t *testing.T) {
		for _, id := range []string{node.GetId(), short} {
			out := mustRun(t, "node", "status", id)
			for key, want := range map[string]string{"ID": node.GetId(), "Name": node.GetName(), "Datacenter": "dc1",
				"Class": "standard", "Status": "ready", "Eligibility": "eligible", "Drain": "false",
				"Resources": "4000 MHz CPU, 8192 MB memory, 100000 MB disk", "Agent Version": "0.1.0"} {
				if got := field1(out, key); got != want {
					t.Errorf("status %s: %s = %q, want %q", id, key, got, want)
				}
			}
			if !strings.Contains(out, "\nAllocations\nNo allocations placed\n") {
				t.Errorf("no empty Allocations section:\n%s", out)
			}
			if !regexp.MustCompile(`(?m)^\S+ +Cluster +Node registered$`).MatchString(out) {
				t.Errorf("no registration event:\n%s", out)
			}
		}
		var resp struct {
			Node struct {
				ID       string `json:"id"`
				SecretID string `json:"secret_id"`
			} `json:"node"`
			Allocs []json.RawMessage `json:"allocs"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, "node", "status", "-json", short)), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Node.ID != node.GetId() || resp.Node.SecretID != "" || resp.Allocs == nil {
			t.Errorf("got %+v", resp)
		}
	})
	t.Run("eligibility", func(t *testing.T) {
		set := `Node "` + node.GetId() + `" scheduling eligibility set: `
		if out := mustRun(t, "node", "eligibility", "-disable", short); out != set+"ineligible for scheduling\n" {
			t.Errorf("stdout:\n%s", out)
		}
		wantLine(t, "false", "ineligible")
		already := `Node "` + node.GetId() + `" scheduling eligibility already set: ineligible for scheduling` + "\n"
		if out := mustRun(t, "node", "eligibility", "-disable", short); out != already {
			t.Errorf("stdout:\n%s\nwant:\n%s", out, already)
		}
		if out := mustRun(t, "node", "eligibility", "-enable", node.GetId()); !strings.HasPrefix(out, set+"eligible for scheduling\n") {
			t.Errorf("stdout:\n%s", out)
		}
		wantLine(t, "false", "eligible")
	})
	t.Run("drain -detach, then -disable", func(t *testing.T) {
		out := mustRun(t, "node", "drain", "-enable", "-detach", "-deadline", "1h", short)
		if !strings.HasPrefix(out, `Node "`+node.GetId()+`" drain strategy set`+"\n") || strings.Contains(out, "Monitoring") {
			t.Errorf("stdout:\n%s", out)
		}
		// With no allocation to move, the leader may complete the drain at
		// any moment: either way the node is ineligible.
		if got := nodeLine(t); got[5] != "ineligible" {
			t.Errorf("node line %q while draining", got)
		}
		_, stderr, err := run(t, withAddr(addr, []string{"node", "eligibility"}, "-enable", short)...)
		if drained := field1(mustRun(t, "node", "status", short), "Drain") != "false"; drained &&
			(status.Code(err) != codes.FailedPrecondition || !strings.Contains(stderr, "`drover node drain -disable "+short+"`")) {
			t.Errorf("eligibility -enable while draining: %v; stderr:\n%s", err, stderr)
		}
		out = mustRun(t, "node", "drain", "-disable", short)
		if !strings.HasSuffix(out, `Node "`+node.GetId()+`" scheduling eligibility set: eligible for scheduling`+"\n") {
			t.Errorf("stdout:\n%s", out)
		}
		wantLine(t, "false", "eligible")
	})
	t.Run("drain followed to completion", func(t *testing.T) {
		out := mustRun(t, "node", "drain", "-enable", short)
		want := regexp.MustCompile(`^Node "` + node.GetId() + `" drain strategy set\n` +
			`==> Monitoring the drain of node "` + short + `"; Ctrl-C stops monitoring, not the drain\n` +
			`(==> 0 allocations still running on the node\n)?` +
			`Node "` + node.GetId() + `" drain complete\n$`)
		if !want.MatchString(out) {
			t.Errorf("stdout:\n%s", out)
		}
		wantLine(t, "false", "ineligible")
		if out := mustRun(t, "node", "status", short); !regexp.MustCompile(`\nEvents\nTime +Subsystem +Message\n\S+ +Drain +Node drain complete\n`).MatchString(out) {
			t.Errorf("the newest event is not the drain's completion:\n%s", out)
		}
	})
	t.Run("system gc", func(t *testing.T) {
		out := mustRun(t, "system", "gc")
		if !regexp.MustCompile(`^Garbage collection (deleted \d+ nodes?, \d+ allocations?, \d+ evaluations?, \d+ jobs? and \d+ job versions? in \d+ raft entr(y|ies)|found nothing to delete)\n$`).MatchString(out) {
			t.Errorf("stdout:\n%s", out)
		}
		var resp map[string]string
		if err := json.Unmarshal([]byte(mustRun(t, "system", "gc", "-json")), &resp); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"nodes", "allocs", "evals", "jobs", "job_versions", "entries"} {
			if _, ok := resp[key]; !ok {
				t.Errorf("-json lacks %q: %v", key, resp)
			}
		}
		// A ready node is never collected.
		wantLine(t, "false", "ineligible")
	})
	t.Run("ambiguous prefix", func(t *testing.T) {
		ids := []string{"aaaaaaaa-0000-4000-8000-000000000001", "aaaaaaaa-0000-4000-8000-000000000002"}
		for _, id := range ids {
			n := mock.Node()
			n.Id = id
			if _, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: n}); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"node", "status", "aaaa"}, {"node", "drain", "-enable", "aaaa"}} {
			stdout, stderr, err := run(t, append(withAddr(addr, args[:2]), args[2:]...)...)
			if !Reported(err) || status.Code(err) != codes.InvalidArgument {
				t.Errorf("%v: error %v, want a reported InvalidArgument", args, err)
			}
			if !strings.HasPrefix(stderr, `Error reading node "aaaa": `) || !strings.Contains(stderr, ids[0]) || !strings.Contains(stderr, ids[1]) {
				t.Errorf("%v: stderr %q does not list both nodes", args, stderr)
			}
			if stdout != "" {
				t.Errorf("%v: stdout %q", args, stdout)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			args       []string
			wantCode   codes.Code
			wantStderr string
		}{
			{[]string{"node", "status", "zz"}, codes.NotFound, `Error reading node "zz": node zz: not found (NotFound)` + "\n"},
			{[]string{"node", "drain", "-enable", "zz"}, codes.NotFound, `Error reading node "zz": node zz: not found (NotFound)` + "\n"},
			{[]string{"node", "eligibility", "-disable", "zz"}, codes.NotFound, `Error reading node "zz": node zz: not found (NotFound)` + "\n"},
		}
		for _, tt := range tests {
			stdout, stderr, err := run(t, append(withAddr(addr, tt.args[:2]), tt.args[2:]...)...)
			if !Reported(err) || status.Code(err) != tt.wantCode {
				t.Errorf("%v: error %v, want a reported %s", tt.args, err, tt.wantCode)
			}
			if stderr != tt.wantStderr {
				t.Errorf("%v: stderr:\n%q\nwant:\n%q", tt.args, stderr, tt.wantStderr)
			}
			if stdout != "" {
				t.Errorf("%v: stdout %q", tt.args, stdout)
			}
		}
	})
}
