package test_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
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

// TestSnapshotRestore: a backup restored into the cluster it came from,
// after more writes, through a follower: every server converges on the
// backup's state, and the leader's duties work from it (a new job is
// placed). A truncated, bit-flipped or foreign file is refused by the
// leader and nothing changes.
func TestSnapshotRestore(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 2*time.Minute)
	leader := c.WaitLeader(ctx)
	follower := c.Others(leader)[0]
	readyNodes(ctx, t, follower.Conn(), 5)
	saved := mock.Job(2)
	if _, err := registerJob(ctx, follower.Conn(), saved, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	waitEvaluated(ctx, t, leader, saved.GetId(), waitPlaced(ctx, t, follower, saved.GetId(), 2))
	// The leader writes the cluster's id once every server has announced
	// itself; a backup taken before would miss it, and the restored
	// cluster write it again.
	poll(ctx, t, "the cluster id written", func() (bool, string) { return clusterID(ctx, t, leader) != "", "not yet" })
	c.WaitConverged(ctx)
	atSave := dataDigests(ctx, t, leader)
	path := filepath.Join(t.TempDir(), "backup.snap")
	if out, err := exec.CommandContext(ctx, droverBin, "operator", "snapshot", "save", "-address", leader.RPCAddr(), path).CombinedOutput(); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	later := mock.Job(1)
	if _, err := registerJob(ctx, follower.Conn(), later, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	// Placed and evaluated, so that nothing changes the state while the
	// refused restores are checked to change nothing.
	waitEvaluated(ctx, t, leader, later.GetId(), waitPlaced(ctx, t, follower, later.GetId(), 1))
	c.WaitConverged(ctx)

	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x04
	before := dataDigests(ctx, t, leader)
	lastWrite, err := droverv1.NewOperatorServiceClient(leader.Conn()).StateDigest(ctx, &droverv1.StateDigestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string][]byte{
		"truncated":   good[:len(good)*2/3],
		"bit-flipped": flipped,
		"foreign":     []byte("PK\x03\x04 not a drover snapshot at all"),
	} {
		_, err := restoreBytes(ctx, follower, file)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not a valid drover snapshot") {
			t.Errorf("restore of a %s file: %v, want InvalidArgument naming the problem", name, err)
		}
	}
	if after := dataDigests(ctx, t, leader); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused restore changed the state:\nbefore %v\nafter  %v", before, after)
	}

	restoredAt := restoreBackup(ctx, t, follower, path)
	c.WaitConverged(ctx)
	// Indexes never go back: the restored state starts past every index
	// handed out before, on every server.
	for _, s := range c.Servers() {
		d, err := droverv1.NewOperatorServiceClient(s.Conn()).StateDigest(ctx, &droverv1.StateDigestRequest{})
		if err != nil || d.GetIndex() < restoredAt || restoredAt <= lastWrite.GetIndex() {
			t.Errorf("%s after the restore at index %d: applied index %d (%v); the last write before was at %d", s, restoredAt, d.GetIndex(), err, lastWrite.GetIndex())
		}
	}
	if got := dataDigests(ctx, t, leader); fmt.Sprint(got) != fmt.Sprint(atSave) {
		t.Errorf("after the restore the tables differ from the save point:\nsaved    %v\nrestored %v", atSave, got)
	}
	if known, err := jobKnown(ctx, leader, later.GetId()); err != nil || known {
		t.Errorf("the job registered after the save is still known after the restore (%v)", err)
	}
	next := mock.Job(2)
	if _, err := registerJob(ctx, follower.Conn(), next, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	waitPlaced(ctx, t, follower, next.GetId(), 2)
}

// restoreBytes sends file to SnapshotRestore on s.
func restoreBytes(ctx context.Context, s *cluster.Server, file []byte) (*droverv1.SnapshotRestoreResponse, error) {
	stream, err := droverv1.NewOperatorServiceClient(s.Conn()).SnapshotRestore(ctx)
	if err != nil {
		return nil, err
	}
	for len(file) > 0 {
		n := min(len(file), 64<<10)
		if err := stream.Send(&droverv1.SnapshotChunk{Data: file[:n]}); err != nil {
			break
		}
		file = file[n:]
	}
	return stream.CloseAndRecv()
}

// TestSnapshotRestoreRebuildsBlockedEvals: an evaluation blocked in a
// backup is blocked again after the restore, and placed when capacity
// comes. The job is stopped between the save and the restore, so the
// leader's blocked set no longer holds it: only a blocked set rebuilt from
// the restored state can place it.
func TestSnapshotRestoreRebuildsBlockedEvals(t *testing.T) {
	c := cluster.New(t, droverBin, 3)
	ctx := within(t, testContext(t), 2*time.Minute)
	leader := c.WaitLeader(ctx)
	readyNodes(ctx, t, leader.Conn(), 2)
	blocked := mock.Job(1)
	blocked.TaskGroups[0].Resources.MemoryMb = 64 << 10
	if _, err := registerJob(ctx, leader.Conn(), blocked, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	waitBlocked(ctx, t, leader, blocked.GetId())
	path := filepath.Join(t.TempDir(), "backup.snap")
	if out, err := exec.CommandContext(ctx, droverBin, "operator", "snapshot", "save", "-address", leader.RPCAddr(), path).CombinedOutput(); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	if _, err := droverv1.NewJobServiceClient(leader.Conn()).Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: blocked.GetId(), RequestId: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "no blocked evaluation of job "+blocked.GetId(), func() (bool, string) {
		return !hasBlockedEval(ctx, t, leader, blocked.GetId()), "still blocked"
	})
	restoreBackup(ctx, t, leader, path)
	leader = c.WaitLeader(ctx)
	waitBlocked(ctx, t, leader, blocked.GetId())
	large := mock.Node()
	large.Resources.MemoryMb = 128 << 10
	if _, err := registerNode(ctx, leader.Conn(), large); err != nil {
		t.Fatal(err)
	}
	heartbeat(ctx, t, leader.Conn(), large)
	waitPlaced(ctx, t, leader, blocked.GetId(), 1)
}

// waitBlocked waits until s holds a blocked evaluation of the job.
func waitBlocked(ctx context.Context, t *testing.T, s *cluster.Server, jobID string) {
	t.Helper()
	poll(ctx, t, "a blocked evaluation of job "+jobID, func() (bool, string) {
		return hasBlockedEval(ctx, t, s, jobID), "none yet"
	})
}

func hasBlockedEval(ctx context.Context, t *testing.T, s *cluster.Server, jobID string) bool {
	for _, e := range listEvals(ctx, t, s) {
		if e.GetJobId() == jobID && e.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_BLOCKED {
			return true
		}
	}
	return false
}
