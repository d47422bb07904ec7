package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestSnapshotSaveAndInspect saves a backup of a server holding nodes and
// jobs, and inspects it: the counts are the server's, the checksums hold,
// and a damaged copy is refused.
func TestSnapshotSaveAndInspect(t *testing.T) {
	t.Setenv(addrEnv, "")
	srv := testserver.Start(t)
	ctx := context.Background()
	for range 3 {
		if _, err := droverv1.NewNodeServiceClient(srv.Conn).Register(ctx, &droverv1.RegisterNodeRequest{Node: mock.Node()}); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := droverv1.NewJobServiceClient(srv.Conn).Register(ctx, &droverv1.RegisterJobRequest{Job: mock.Job(2)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "backup.snap")
	out, stderr, err := run(t, withAddr(srv.RPCAddr(), []string{"operator", "snapshot", "save"}, path)...)
	if err != nil || !strings.Contains(out, "Saved snapshot of index") {
		t.Fatalf("snapshot save: %v\n%s%s", err, out, stderr)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
	out, stderr, err = run(t, "operator", "snapshot", "inspect", "-json", path)
	if err != nil {
		t.Fatalf("snapshot inspect: %v\n%s", err, stderr)
	}
	var in snapshotInspection
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("inspect -json: %v\n%s", err, out)
	}
	counts := map[string]int{}
	for _, tb := range in.Tables {
		counts[tb.Table] = tb.Records
	}
	if in.Meta.Index < reg.GetIndex() || counts["nodes"] != 3 || counts["jobs"] != 1 || in.Meta.ClusterID == "" {
		t.Errorf("inspected meta %+v and counts %v; want index >= %d, 3 nodes, 1 job, a cluster id", in.Meta, counts, reg.GetIndex())
	}
	if out, _, err := run(t, "operator", "snapshot", "inspect", path); err != nil || !strings.Contains(out, "verified") {
		t.Errorf("snapshot inspect: %v\n%s", err, out)
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x01
	damaged := filepath.Join(t.TempDir(), "damaged.snap")
	if err := os.WriteFile(damaged, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := run(t, "operator", "snapshot", "inspect", damaged); err == nil || !strings.Contains(err.Error()+stderr, "not a valid drover snapshot") {
		t.Errorf("inspect of a damaged file: %v\n%s", err, stderr)
	}
}
