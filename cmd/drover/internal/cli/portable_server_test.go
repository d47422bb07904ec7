package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestNodeStatusJSONAfterInvalidUTF8 registers nodes whose name or
// attributes are not valid UTF-8 through drover's codec, which lets them
// through to the server. The server refuses them, so `node status -json`
// (protojson, which refuses invalid UTF-8 as the standard runtime does)
// keeps working and lists the valid nodes, non-ASCII names included.
func TestNodeStatusJSONAfterInvalidUTF8(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	for _, change := range []func(*droverv1.Node){
		func(n *droverv1.Node) { n.Name = "bad\x80name" },
		func(n *droverv1.Node) { n.Attributes["kernel.name"] = "\xff" },
		func(n *droverv1.Node) { n.Attributes["\xfe"] = "x" },
	} {
		n := mock.Node()
		change(n)
		if _, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: n}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("register %q %v: %v, want INVALID_ARGUMENT", n.GetName(), n.GetAttributes(), err)
		}
	}
	valid := mock.Node()
	valid.Name = "nœud-日本"
	if _, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: valid.CloneVT()}); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, err := run(t, withAddr(srv.RPCAddr(), []string{"node", "status"}, "-json")...)
	if err != nil {
		t.Fatalf("node status -json: %v; stderr:\n%s", err, stderr)
	}
	var resp struct {
		Nodes []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(stdout), &resp); err != nil {
		t.Fatalf("%v; stdout:\n%s", err, stdout)
	}
	if len(resp.Nodes) != 1 || resp.Nodes[0].ID != valid.GetId() || resp.Nodes[0].Name != valid.GetName() {
		t.Errorf("nodes %+v, want only %s named %q", resp.Nodes, valid.GetId(), valid.GetName())
	}
}
