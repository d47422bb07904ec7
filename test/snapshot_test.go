package test_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/test/cluster"
)

// inspected is what `drover operator snapshot inspect -json` prints.
type inspected struct {
	Meta struct {
		ClusterID string `json:"cluster_id"`
		ServerID  string `json:"server_id"`
		Index     uint64 `json:"index"`
	} `json:"meta"`
	Tables []struct {
		Table   string `json:"table"`
		Records int    `json:"records"`
	} `json:"tables"`
}

// TestSnapshotSaveThroughFollower: `drover operator snapshot save` against
// a follower streams the leader's backup through it, holding every write
// acknowledged before; with -stale the follower takes its own. The backups
// check out offline.
func TestSnapshotSaveThroughFollower(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 2*time.Minute)
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	registerNodes(ctx, t, follower.Conn(), 20, 4)
	reg, err := registerJob(ctx, follower.Conn(), mock.Job(3), uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(ctx)
	for _, tc := range []struct {
		name  string
		stale bool
		from  *cluster.Server
	}{{"through the follower", false, leader}, {"stale", true, follower}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "backup.snap")
			args := []string{"operator", "snapshot", "save", "-address", follower.RPCAddr()}
			if tc.stale {
				args = append(args, "-stale")
			}
			if out, err := exec.CommandContext(ctx, droverBin, append(args, path)...).CombinedOutput(); err != nil {
				t.Fatalf("snapshot save: %v\n%s", err, out)
			}
			out, err := exec.CommandContext(ctx, droverBin, "operator", "snapshot", "inspect", "-json", path).Output()
			if err != nil {
				t.Fatalf("snapshot inspect: %v\n%s", err, out)
			}
			var in inspected
			if err := json.Unmarshal(out, &in); err != nil {
				t.Fatalf("inspect -json: %v\n%s", err, out)
			}
			counts := map[string]int{}
			for _, tb := range in.Tables {
				counts[tb.Table] = tb.Records
			}
			if in.Meta.ServerID != tc.from.ID() || in.Meta.Index < reg.GetIndex() || counts["nodes"] != 20 || counts["jobs"] != 1 {
				t.Errorf("backup from %s at index %d with %v; want it taken by %s at index >= %d with 20 nodes and 1 job",
					in.Meta.ServerID, in.Meta.Index, counts, tc.from.ID(), reg.GetIndex())
			}
		})
	}
}
