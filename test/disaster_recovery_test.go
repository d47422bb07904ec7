package test_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/backup"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestRestoreAfterLosingEveryServer: a backup taken while agents run their
// allocations and jobs are being registered is restored into a new
// cluster, on new addresses, after every server of the old one is gone.
// The new cluster holds exactly the backup's state; once the agents are
// pointed at it they carry on: every allocation of the backup is still
// running on its node, none is replaced, and no node is marked down.
func TestRestoreAfterLosingEveryServer(t *testing.T) {
	ctx := within(t, testContext(t), 4*time.Minute)
	// Agents heartbeat every second or two; a new leader (and a restore)
	// gives every node the failover TTL (minutes) to come back.
	heartbeats := cluster.Args("-heartbeat-min-ttl", "2s", "-heartbeat-grace", "2s")
	old, fleet := deployCluster(t, ctx, heartbeats)
	poll(ctx, t, "the cluster id written", func() (bool, string) { return clusterID(ctx, t, old.Servers()[0]) != "", "not yet" })
	load := startJobLoad(ctx, t, old.Servers())
	load.waitPlaced(ctx, t, old.Servers()[0], 5)

	path := filepath.Join(t.TempDir(), "backup.snap")
	if out, err := exec.CommandContext(ctx, droverBin, "operator", "snapshot", "save", "-address", old.Servers()[1].RPCAddr(), path).CombinedOutput(); err != nil {
		t.Fatalf("snapshot save under load: %v\n%s", err, out)
	}
	load.stop()
	saved := readBackup(t, path)
	t.Logf("backup at index %d with %d allocations; %d jobs registered in all", saved.meta.Index, len(saved.allocs), len(load.acked()))
	for _, s := range old.Servers() {
		s.Stop()
	}

	// The new cluster knows nothing of the old one until the restore.
	fresh := cluster.New(t, droverBin, 3, heartbeats)
	leader := fresh.WaitLeader(ctx)
	fresh.WaitHealthy(ctx, 3)
	// The schedulers wait until the restored state has been compared with
	// the backup: the backup holds evaluations still pending, which they
	// would process at once.
	for _, s := range fresh.Servers() {
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: proto.Bool(true)})
	}
	restoredAt := restoreBackup(ctx, t, leader, path)
	fresh.WaitConverged(ctx)
	// Every server holds the backup's state. Only evaluations may differ:
	// the deployment watcher, started again from the restored state,
	// creates one for each deployment in progress; those are the ones
	// created after the restore.
	for _, s := range fresh.Servers() {
		got := dataDigests(ctx, t, s)
		delete(got, "evals")
		want := maps.Clone(saved.digests)
		delete(want, "evals")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s after the restore: tables differ from the backup:\nbackup   %v\nrestored %v", s, want, got)
		}
		restored := 0
		for _, e := range listEvals(ctx, t, s) {
			if e.GetCreateIndex() > restoredAt {
				continue
			}
			restored++
			if was := saved.evals[e.GetId()]; !proto.Equal(was, e) {
				t.Errorf("%s after the restore: evaluation %s is\n%v\nin the backup\n%v", s, e.GetId(), e, was)
			}
		}
		if restored != len(saved.evals) {
			t.Errorf("%s after the restore: %d evaluations from before it, the backup has %d", s, restored, len(saved.evals))
		}
	}
	for _, s := range fresh.Servers() {
		setWorkers(ctx, t, s, &droverv1.UpdateSchedulerWorkersRequest{Paused: proto.Bool(false)})
	}
	// Every server announced itself again: the restored records named the
	// old cluster's addresses, and a follower forwards through them.
	waitAnnounced(ctx, t, fresh)
	follower := fresh.Others(fresh.WaitLeader(ctx))[0]
	// The leader's duties run from the restored state: the broker and the
	// workers place a new job, and the deployment watcher took up every
	// deployment the backup had in progress.
	next := mock.Job(1)
	if _, err := registerJob(ctx, follower.Conn(), next, uuid.NewString()); err != nil {
		t.Fatalf("register a job through follower %s after the restore: %v", follower, err)
	}
	waitPlaced(ctx, t, follower, next.GetId(), 1)
	watched := map[string]bool{}
	for _, e := range listEvals(ctx, t, follower) {
		if e.GetCreateIndex() > restoredAt && e.GetTriggeredBy() == droverv1.EvalTrigger_EVAL_TRIGGER_DEPLOYMENT {
			watched[e.GetJobId()] = true
		}
	}
	for _, d := range saved.deployments {
		if d.GetStatus() == droverv1.DeploymentStatus_DEPLOYMENT_STATUS_RUNNING && !watched[d.GetJobId()] {
			t.Errorf("deployment %s of job %s was in progress in the backup, and the deployment watcher did not take it up", d.GetId(), d.GetJobId())
		}
	}

	// The agents are pointed at the new servers, and every one heartbeats.
	since := time.Now()
	var addrs []string
	for _, s := range fresh.Servers() {
		addrs = append(addrs, s.RPCAddr())
	}
	fleet.AddServers(addrs...)
	waitHeartbeatedSince(ctx, t, since, fleet)
	waitFleetReady(ctx, t, fleet)
	// Two rounds of heartbeats and long polls later, every allocation the
	// backup had running is still running where it was.
	waitHeartbeatedSince(ctx, t, time.Now(), fleet)
	waitHeartbeatedSince(ctx, t, time.Now(), fleet)
	now := listAllocs(ctx, t, fresh.WaitLeader(ctx))
	for id, was := range saved.allocs {
		if was.Terminal() {
			continue
		}
		is := now[id]
		switch {
		case is == nil:
			t.Errorf("allocation %s of job %s on node %s is gone after the restore", id, was.GetJobId(), was.GetNodeId())
		case is.GetNodeId() != was.GetNodeId() || is.Terminal():
			t.Errorf("allocation %s: on %s desired %s client %s after the restore; on %s desired %s client %s in the backup",
				id, is.GetNodeId(), is.GetDesiredStatus(), is.GetClientStatus(), was.GetNodeId(), was.GetDesiredStatus(), was.GetClientStatus())
		}
	}
	for _, a := range now {
		if prev := a.GetPreviousAllocation(); prev != "" && a.GetCreateIndex() > restoredAt {
			t.Errorf("allocation %s replaced %s after the restore", a.GetId(), prev)
		}
	}
	for _, a := range fleet.Agents() {
		if st := a.Status(); st != droverv1.NodeStatus_NODE_STATUS_READY {
			t.Errorf("node %s is %s after the agents moved to the new cluster", a.Node().ID, st)
		}
	}
}

// savedBackup is what a backup file holds, read offline.
type savedBackup struct {
	meta    backup.Meta
	digests map[string]string
	allocs  map[string]*droverv1.Allocation
	evals   map[string]*droverv1.Evaluation
	// deployments are those of the backup.
	deployments []*droverv1.Deployment
}

// readBackup restores the backup at path into a state store of the test's
// own, for its table digests and allocations.
func readBackup(t *testing.T, path string) savedBackup {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var raw bytes.Buffer
	meta, err := backup.Read(file, &raw)
	if err != nil {
		t.Fatalf("read backup %s: %v", path, err)
	}
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	f := fsm.New(st, events.NewBroker(events.Config{}), slog.New(slog.DiscardHandler))
	if err := f.Restore(io.NopCloser(&raw)); err != nil {
		t.Fatalf("restore backup %s offline: %v", path, err)
	}
	snap := st.Snapshot()
	all, err := snap.Digest()
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for table, d := range all {
		if table != "servers" && table != "index" {
			digests[table] = d
		}
	}
	allocs := map[string]*droverv1.Allocation{}
	for a := range snap.Allocs() {
		allocs[a.GetId()] = a
	}
	evals := map[string]*droverv1.Evaluation{}
	for e := range snap.Evals() {
		evals[e.GetId()] = e
	}
	return savedBackup{meta: meta, digests: digests, allocs: allocs, evals: evals, deployments: slices.Collect(snap.Deployments())}
}

// listEvals lists every evaluation s knows.
func listEvals(ctx context.Context, t *testing.T, s *cluster.Server) []*droverv1.Evaluation {
	t.Helper()
	client := droverv1.NewEvalServiceClient(s.Conn())
	return listPages(ctx, t, "evaluations on "+s.ID(), func(ctx context.Context, page *droverv1.PageOptions) ([]*droverv1.Evaluation, string, error) {
		resp, err := client.List(ctx, &droverv1.ListEvaluationsRequest{Page: page})
		return resp.GetEvaluations(), resp.GetNextToken(), err
	})
}

// listAllocs lists every allocation s knows, by id.
func listAllocs(ctx context.Context, t *testing.T, s *cluster.Server) map[string]*droverv1.Allocation {
	t.Helper()
	client := droverv1.NewAllocServiceClient(s.Conn())
	allocs := listPages(ctx, t, "allocations on "+s.ID(), func(ctx context.Context, page *droverv1.PageOptions) ([]*droverv1.Allocation, string, error) {
		resp, err := client.List(ctx, &droverv1.ListAllocationsRequest{Page: page})
		return resp.GetAllocations(), resp.GetNextToken(), err
	})
	out := make(map[string]*droverv1.Allocation, len(allocs))
	for _, a := range allocs {
		out[a.GetId()] = a
	}
	return out
}

// listPages calls list page by page, each call bounded in time, and
// returns everything listed.
func listPages[T any](ctx context.Context, t *testing.T, what string, list func(context.Context, *droverv1.PageOptions) ([]T, string, error)) []T {
	t.Helper()
	var out []T
	token := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		items, next, err := list(cctx, &droverv1.PageOptions{NextToken: token, PageSize: 1000})
		cancel()
		if err != nil {
			t.Fatalf("list %s: %v", what, err)
		}
		out = append(out, items...)
		if token = next; token == "" {
			return out
		}
	}
}

// restoreBackup restores the backup at path through s with the CLI and
// returns the index the restored state starts at.
func restoreBackup(ctx context.Context, t *testing.T, s *cluster.Server, path string) uint64 {
	t.Helper()
	out, err := exec.CommandContext(ctx, droverBin, "operator", "snapshot", "restore", "-address", s.RPCAddr(), path).CombinedOutput()
	if err != nil {
		t.Fatalf("snapshot restore through %s: %v\n%s", s, err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
	m := regexp.MustCompile(`starts at index (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("snapshot restore printed no index:\n%s", out)
	}
	index, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return index
}

// jobLoad registers a small service job through each server in turn, ten
// a second, until stopped, and records the jobs acknowledged.
type jobLoad struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	jobs  []string
	fails []error
}

func startJobLoad(ctx context.Context, t *testing.T, servers []*cluster.Server) *jobLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	l := &jobLoad{t: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		pace := time.NewTicker(100 * time.Millisecond)
		defer pace.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-pace.C:
			case <-ctx.Done():
				return
			}
			j := mock.Job(2)
			j.Id = fmt.Sprintf("load-%03d", i)
			_, err := registerJob(ctx, servers[i%len(servers)].Conn(), j, uuid.NewString())
			l.mu.Lock()
			switch {
			case err == nil:
				l.jobs = append(l.jobs, j.GetId())
			case ctx.Err() == nil && status.Code(err) != codes.Unavailable:
				l.fails = append(l.fails, fmt.Errorf("register %s: %w", j.GetId(), err))
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(l.stop)
	return l
}

// waitPlaced waits until n of the jobs are fully placed, as s sees them.
func (l *jobLoad) waitPlaced(ctx context.Context, t *testing.T, s *cluster.Server, n int) {
	t.Helper()
	poll(ctx, t, fmt.Sprintf("%d load jobs placed", n), func() (bool, string) {
		jobs := l.acked()
		if len(jobs) < n {
			return false, fmt.Sprintf("%d registered", len(jobs))
		}
		for _, id := range jobs[:n] {
			allocs, err := jobAllocs(ctx, s.Conn(), id)
			if err != nil || wantedRunning(allocs) < 2 {
				return false, fmt.Sprintf("%s: %d allocations wanted running (%v)", id, wantedRunning(allocs), err)
			}
		}
		return true, ""
	})
}

func (l *jobLoad) acked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.jobs...)
}

// stop ends the load; a registration that failed other than UNAVAILABLE
// fails the test.
func (l *jobLoad) stop() {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, err := range l.fails {
		l.t.Error(err)
	}
	l.fails = nil
}
