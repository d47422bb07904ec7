package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// Fault is one kind of failure the nemesis injects into a running cluster
// while the clients work, and heals again.
type Fault struct {
	// Name is the fault's name in test names, logs and docs/reliability.md.
	Name string
	// Servers is the size of the cluster the fault runs against.
	Servers int
	// Simulates says what the fault stands for in production.
	Simulates string
	// Requires, if set, says why the fault cannot run here ("" when it can).
	Requires func() string
	// Options adjust the cluster the fault runs against.
	Options []cluster.Option
	// Inject breaks the cluster, keeps it broken for about hold, and heals
	// it: when Inject returns, every server that should run is running and
	// reachable again. It runs on the test's goroutine.
	Inject func(ctx context.Context, e *Env, hold time.Duration)
}

// Env is what a fault acts on.
type Env struct {
	T       *testing.T
	Cluster *cluster.Cluster
	Rng     *rand.Rand
	// Note records what the nemesis did, for the run's log and artifacts.
	Note func(format string, args ...any)
}

// between draws a duration uniformly from [lo, hi].
func (e *Env) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(e.Rng.Int64N(int64(hi-lo)+1))
}

// leader waits for the leader among the running servers.
func (e *Env) leader(ctx context.Context) *cluster.Server {
	return e.Cluster.WaitLeader(ctx, e.Cluster.Live()...)
}

// follower picks a random running server other than the leader: not one
// an earlier round stopped or removed.
func (e *Env) follower(ctx context.Context) *cluster.Server {
	leader := e.leader(ctx)
	others := slices.DeleteFunc(e.Cluster.Live(), func(s *cluster.Server) bool { return s == leader })
	return others[e.Rng.IntN(len(others))]
}

// hold keeps a fault in place: the fault's duration, not a wait for
// anything to happen.
func hold(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Data dirs of the disk-full fault: a tmpfs of diskSize per server, filled
// to diskLeft bytes free, below the servers' 64MiB reserve.
const (
	diskSize = 256 << 20
	diskLeft = 1 << 20
)

// netns runs the servers in network namespaces of their own, for faults
// that cut links; the cluster harness skips the test with the reason where
// the machine cannot make them.
var netns = []cluster.Option{cluster.Netns()}

// Faults is every fault of the suite.
func Faults() []Fault {
	return []Fault{
		{
			Name: "kill-leader", Servers: 3,
			Simulates: "the leader's machine crashes or its process is OOM-killed",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				s := e.leader(ctx)
				e.Note("kill -9 leader %s for %s", s, d)
				s.Kill()
				hold(ctx, d)
				s.Restart()
			},
		},
		{
			Name: "kill-follower", Servers: 3,
			Simulates: "a follower's machine crashes",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				s := e.follower(ctx)
				e.Note("kill -9 follower %s for %s", s, d)
				s.Kill()
				hold(ctx, d)
				s.Restart()
			},
		},
		{
			Name: "kill-all", Servers: 3,
			Simulates: "a power loss of the whole cluster",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				e.Note("kill -9 every server for %s", d)
				for _, s := range e.Cluster.Servers() {
					s.Kill()
				}
				hold(ctx, d)
				for _, s := range e.Cluster.Servers() {
					s.Restart()
				}
			},
		},
		{
			Name: "pause-leader", Servers: 3,
			Simulates: "a long GC pause, a stalled VM or a frozen container on the leader",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				s := e.leader(ctx)
				d = e.between(time.Second, d)
				e.Note("SIGSTOP leader %s for %s", s, d)
				s.Pause()
				hold(ctx, d)
				s.Resume()
			},
		},
		{
			Name: "pause-follower", Servers: 3,
			Simulates: "the same on a follower",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				s := e.follower(ctx)
				d = e.between(time.Second, d)
				e.Note("SIGSTOP follower %s for %s", s, d)
				s.Pause()
				hold(ctx, d)
				s.Resume()
			},
		},
		{
			Name: "partition-leader", Servers: 3, Options: netns,
			Simulates: "the leader's rack or availability zone loses its network",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				s := e.leader(ctx)
				e.Note("isolate leader %s for %s", s, d)
				e.Cluster.Isolate(s)
				hold(ctx, d)
				e.Cluster.Heal()
			},
		},
		{
			Name: "partition-majority", Servers: 5, Options: netns,
			Simulates: "a network split between two sites, the leader on the smaller side",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				leader := e.leader(ctx)
				others := e.Cluster.Others(leader)
				e.Rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
				minority := []*cluster.Server{leader, others[0]}
				e.Note("partition %v from %v for %s", minority, others[1:], d)
				e.Cluster.Partition(minority, others[1:])
				hold(ctx, d)
				e.Cluster.Heal()
			},
		},
		{
			Name: "partition-bridge", Servers: 5, Options: netns,
			Simulates: "a broken link between two sites that a third still reaches both of",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				all := e.Cluster.Servers()
				bridge := all[e.Rng.IntN(len(all))]
				first, second := e.Cluster.Bridge(bridge)
				e.Note("bridge %s between %v and %v for %s", bridge, first, second, d)
				hold(ctx, d)
				e.Cluster.Heal()
			},
		},
		{
			Name: "partition-pause", Servers: 3, Options: netns,
			Simulates: "a leader that stalls and comes back on a network that has lost it",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				s := e.leader(ctx)
				e.Note("SIGSTOP leader %s, then isolate it, for %s", s, d)
				s.Pause()
				e.Cluster.Isolate(s)
				hold(ctx, d/2)
				e.Note("resume %s, still isolated", s)
				s.Resume()
				hold(ctx, d/2)
				e.Cluster.Heal()
			},
		},
		{
			Name: "partition-oneway", Servers: 3, Options: netns,
			Simulates: "an asymmetric link failure: the leader's packets to a follower are lost, the follower's arrive",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				s := e.leader(ctx)
				to := e.follower(ctx)
				e.Note("drop what %s sends to %s for %s", s, to, d)
				e.Cluster.CutOneWay(s, to)
				hold(ctx, d)
				e.Cluster.Heal()
			},
		},
		{
			Name: "disk-full", Servers: 3, Options: []cluster.Option{cluster.TmpfsDataDir(diskSize)},
			Simulates: "a data disk that fills up (logs, a runaway file) on the leader, a follower or every server",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				var full []*cluster.Server
				switch e.Rng.IntN(3) {
				case 0:
					full = []*cluster.Server{e.leader(ctx)}
				case 1:
					full = []*cluster.Server{e.follower(ctx)}
				default:
					full = e.Cluster.Servers()
				}
				for _, s := range full {
					free := s.FillDataDir(diskLeft)
					e.Note("filled the data dir of %s (%d bytes free) for %s", s, free, d)
				}
				hold(ctx, d)
				for _, s := range full {
					s.FreeDataDir()
				}
			},
		},
		{
			// Frequent snapshots, so that there is one to damage; long
			// trailing logs, so that a server rebuilding from a snapshot
			// catches up through the log rather than a second, older
			// snapshot (hashicorp/raft issue 697: a follower that installs
			// a snapshot older than its own panics).
			Name: "damaged-data-dir", Servers: 3, Options: []cluster.Option{cluster.Snapshots(256, time.Second, 4096)},
			Simulates: "a disk that loses or corrupts part of a file: a follower's raft log or snapshot after a crash",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				s := e.follower(ctx)
				s.Kill()
				// A server whose newest snapshot is damaged but whose log
				// covers an older one starts from that one (raftnode's own
				// tests cover it); with every snapshot damaged it must
				// refuse, naming the newest.
				file, damage := cluster.RaftDB, cluster.TruncateTo(16<<10)
				damaged := []string{file}
				if snaps := s.Snapshots(); len(snaps) > 0 && e.Rng.IntN(2) == 0 {
					damaged = nil
					for _, snap := range snaps {
						damaged = append(damaged, filepath.Join(snap, "state.bin"))
					}
					file, damage = damaged[0], cluster.FlipBitAt(-200)
				}
				e.Note("kill -9 %s, damage %v (%s)", s, damaged, damage)
				for _, f := range damaged {
					s.DamageFile(f, damage)
				}
				err, out := s.StartRefused()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(out, filepath.Join(s.DataDir(), file)) {
					e.T.Errorf("%s with damaged %s: exited with %v, want a non-zero status and a message naming the file; it said:\n%s", s, file, err, out)
				}
				hold(ctx, d)
				e.Note("restart %s with -rebuild-from-peers", s)
				s.RestartWith("-rebuild-from-peers")
				e.Cluster.WaitHealthy(ctx, 3)
			},
		},
		{
			Name: "membership", Servers: 3,
			Simulates: "an operator replacing servers and moving leadership during a maintenance",
			Inject: func(ctx context.Context, e *Env, d time.Duration) {
				added := e.Cluster.AddServer()
				e.Note("added %s", added)
				e.Cluster.WaitHealthy(ctx, 4)
				target := e.follower(ctx)
				e.Note("transfer leadership to %s", target)
				if _, err := droverv1.NewOperatorServiceClient(e.leader(ctx).Conn()).RaftTransferLeadership(ctx,
					&droverv1.RaftTransferLeadershipRequest{Id: target.ID()}); err != nil {
					e.T.Logf("transfer leadership to %s: %v (the cluster may have moved on)", target, err)
				}
				hold(ctx, d/2)
				gone := e.follower(ctx)
				e.Note("remove %s and stop it", gone)
				if _, err := droverv1.NewOperatorServiceClient(e.leader(ctx).Conn()).RaftRemovePeer(ctx,
					&droverv1.RaftRemovePeerRequest{Id: gone.ID()}); err != nil {
					e.T.Fatalf("remove %s: %v", gone, err)
				}
				gone.Stop()
				e.Cluster.WaitHealthy(ctx, 3)
			},
		},
	}
}
