package test_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// reconnectSeeds is how many randomized reconnects run, reconnectParallel
// how many at once (each has its own job and nodes).
const (
	reconnectSeeds    = 200
	reconnectParallel = 8
	// seedTimeout bounds one seed from start to convergence.
	seedTimeout = 45 * time.Second
)

// TestRandomizedReconnects disconnects a node whose allocations tolerate
// disconnects, lets a replacement be placed elsewhere, sometimes updates
// the job meanwhile, and brings the node back with its first Register,
// heartbeat, UpdateAlloc and GetAllocs in a random order and interleaving,
// concurrently with scheduling, on a real 3-server cluster. For every seed
// it checks, from the servers' event stream and state:
//   - after convergence exactly count allocations run, no more;
//   - the group never has nothing running (from its first placement on);
//   - the node is never ready before reporting its allocations after its
//     last missed heartbeat;
//   - no allocation is stopped without a recorded reason.
//
// A failure names its seed; DROVER_RECONNECT_SEED=n reruns one seed.
func TestRandomizedReconnects(t *testing.T) {
	c := cluster.New(t, droverBin, 3, cluster.Args(
		"-heartbeat-min-ttl", "150ms", "-heartbeat-grace", "150ms",
		"-heartbeat-max-per-second", "1000000", "-heartbeat-mass-failure-fraction", "0",
		"-update-alloc-batch", "10ms",
	))
	ctx := within(t, t.Context(), 8*time.Minute)
	c.WaitLeader(ctx)
	conns := []grpc.ClientConnInterface{}
	for _, s := range c.Servers() {
		conns = append(conns, s.Conn())
	}

	seeds := make([]uint64, 0, reconnectSeeds)
	if one := envSeed(t); one != nil {
		seeds = append(seeds, *one)
	} else {
		for i := range uint64(reconnectSeeds) {
			seeds = append(seeds, i+1)
		}
	}
	var (
		mu       sync.Mutex
		failures []error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, reconnectParallel)
	)
	start := time.Now()
	for _, seed := range seeds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			seedCtx, cancel := context.WithTimeout(ctx, seedTimeout)
			defer cancel()
			if err := runReconnectSeed(seedCtx, conns, seed); err != nil {
				mu.Lock()
				failures = append(failures, fmt.Errorf("seed %d: %w", seed, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d seeds in %s", len(seeds), time.Since(start).Round(time.Millisecond))
	for _, err := range failures {
		t.Error(err)
	}
}

func envSeed(t *testing.T) *uint64 {
	v, ok := os.LookupEnv("DROVER_RECONNECT_SEED")
	if !ok {
		return nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("DROVER_RECONNECT_SEED=%q: %v", v, err)
	}
	return &n
}

// reconnectCase is what one seed chose.
type reconnectCase struct {
	seed     uint64
	count    int32
	strategy droverv1.ReconnectStrategy
	update   bool
	// delays are the waits before the returning node's first Register,
	// heartbeat, UpdateAlloc and GetAllocs.
	delays [4]time.Duration
}

func newReconnectCase(seed uint64) reconnectCase {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	rc := reconnectCase{
		seed:     seed,
		count:    1 + r.Int32N(2),
		strategy: droverv1.ReconnectStrategy(r.IntN(5)),
		update:   r.IntN(2) == 0,
	}
	for i := range rc.delays {
		rc.delays[i] = time.Duration(r.IntN(300)) * time.Millisecond
	}
	return rc
}

func (rc reconnectCase) String() string {
	return fmt.Sprintf("count %d, strategy %s, update %v, delays register/heartbeat/report/fetch %v",
		rc.count, rc.strategy, rc.update, rc.delays)
}

// runReconnectSeed runs one randomized reconnect and returns what went
// wrong, if anything.
func runReconnectSeed(ctx context.Context, conns []grpc.ClientConnInterface, seed uint64) (err error) {
	rc := newReconnectCase(seed)
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %w", rc, err)
		}
	}()
	conn := conns[int(seed)%len(conns)]
	class := "seed-" + strconv.FormatUint(seed, 10)
	flaky := &reconnectAgent{conn: conn, node: seedNode(class)}
	steady := &reconnectAgent{conn: conn, node: seedNode(class)}
	job := seedJob(rc, class)

	agents, stopAgents := context.WithCancel(ctx)
	defer func() {
		stopAgents()
		err = errors.Join(err, flaky.wait(), steady.wait())
	}()
	flakyCtx, disconnect := context.WithCancel(agents)
	defer disconnect()

	// The flaky node alone is ready when the job arrives, so the job's
	// allocations start there.
	if err := flaky.register(ctx); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if _, err := flaky.heartbeatOnce(ctx); err != nil {
		return err
	}
	flaky.goLoops(flakyCtx)
	from, err := currentIndex(ctx, conn)
	if err != nil {
		return err
	}
	watch := startReconnectWatch(ctx, conn, from, job.GetId(), flaky.node.GetId())
	if _, err := registerJob(ctx, conn, job, ""); err != nil {
		return fmt.Errorf("register job: %w", err)
	}
	originals, err := waitFor(ctx, "the job running on the flaky node", func() ([]*droverv1.Allocation, bool, error) {
		allocs, err := jobAllocs(ctx, conn, job.GetId())
		running := filterAllocs(allocs, func(a *droverv1.Allocation) bool {
			return a.GetNodeId() == flaky.node.GetId() && isRunningWanted(a)
		})
		return running, len(running) == int(rc.count), err
	})
	if err != nil {
		return err
	}

	// A second node takes the replacements.
	if err := steady.register(ctx); err != nil {
		return err
	}
	steady.goLoops(agents)

	// The flaky node's loops are gone before it comes back: no call of
	// theirs still in flight can arrive after the disconnect.
	disconnect()
	if err := flaky.wait(); err != nil {
		return err
	}
	if _, err := waitFor(ctx, "the originals unknown and a replacement placed elsewhere", func() ([]*droverv1.Allocation, bool, error) {
		allocs, err := jobAllocs(ctx, conn, job.GetId())
		repl := filterAllocs(allocs, func(a *droverv1.Allocation) bool {
			return a.GetNodeId() == steady.node.GetId() && !a.Terminal()
		})
		unknown := filterAllocs(allocs, func(a *droverv1.Allocation) bool {
			return a.GetNodeId() == flaky.node.GetId() && !a.ServerTerminal() &&
				a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
		})
		return nil, len(repl) > 0 && len(unknown) == len(originals), err
	}); err != nil {
		return err
	}
	if rc.update {
		updated := job.CloneVT()
		updated.Meta = map[string]string{"update": "1"}
		if _, err := registerJob(ctx, conn, updated, ""); err != nil {
			return fmt.Errorf("update job: %w", err)
		}
		job = updated
	}

	if err := comeBack(agents, flaky, rc, originals); err != nil {
		return err
	}
	converged, err := waitConverged(ctx, conn, job, rc.count, flaky.node.GetId())
	if err != nil {
		return err
	}
	stopAgents()
	if err := errors.Join(flaky.wait(), steady.wait()); err != nil {
		return err
	}
	if err := watch.wait(ctx, converged); err != nil {
		return err
	}
	if _, err := droverv1.NewJobServiceClient(conn).Deregister(ctx, &droverv1.DeregisterJobRequest{JobId: job.GetId()}); err != nil {
		return fmt.Errorf("stop job: %w", err)
	}
	return nil
}

// comeBack brings the flaky node back: its first Register, heartbeat,
// allocation report (the originals still running, as far as it knows) and
// GetAllocs start after their own random delays and run concurrently;
// each is retried until it succeeds. The agent then carries on as usual.
func comeBack(ctx context.Context, a *reconnectAgent, rc reconnectCase, originals []*droverv1.Allocation) error {
	var report []*droverv1.AllocClientUpdate
	for _, o := range originals {
		report = append(report, &droverv1.AllocClientUpdate{AllocId: o.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING})
	}
	calls := [4]func() error{
		func() error { return a.register(ctx) },
		func() error {
			if _, err := a.heartbeatOnce(ctx); err != nil {
				return err
			}
			a.goLoop(ctx, a.heartbeatLoop)
			return nil
		},
		func() error { return a.report(ctx, report) },
		func() error { _, err := a.getAllocs(ctx, 0); return err },
	}
	errs := make(chan error, len(calls))
	for i, call := range calls {
		go func() {
			select {
			case <-ctx.Done():
				errs <- ctx.Err()
				return
			case <-time.After(rc.delays[i]):
			}
			errs <- call()
		}()
	}
	var all []error
	for range calls {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return fmt.Errorf("coming back: %w", err)
	}
	a.goLoop(ctx, a.runLoop)
	return nil
}

// waitConverged waits until the node is ready, exactly count allocations
// of the current job version run, every other one has ended, and no
// evaluation of the job is left to run. It returns the newest modify index
// of the node and the allocations, which the event stream must reach.
func waitConverged(ctx context.Context, conn grpc.ClientConnInterface, job *droverv1.Job, count int32, nodeID string) (uint64, error) {
	return waitFor(ctx, "convergence", func() (uint64, bool, error) {
		nodeResp, err := droverv1.NewNodeServiceClient(conn).Get(ctx, &droverv1.GetNodeRequest{NodeId: nodeID})
		if err != nil || nodeResp.GetNode().GetStatus() != droverv1.NodeStatus_NODE_STATUS_READY {
			return 0, false, err
		}
		newest := nodeResp.GetNode().GetModifyIndex()
		allocs, err := jobAllocs(ctx, conn, job.GetId())
		if err != nil {
			return 0, false, err
		}
		jobResp, err := droverv1.NewJobServiceClient(conn).Get(ctx, &droverv1.GetJobRequest{JobId: job.GetId()})
		if err != nil {
			return 0, false, err
		}
		version := jobResp.GetJob().GetVersion()
		running := 0
		for _, a := range allocs {
			newest = max(newest, a.GetModifyIndex())
			switch {
			case a.ClientTerminal():
			case isRunningWanted(a) && a.GetJobVersion() == version:
				running++
			default:
				return 0, false, nil
			}
		}
		// More than count may run for a moment, while the scheduler
		// decides which of an original and its replacement to keep.
		if running != int(count) {
			return 0, false, nil
		}
		evals, err := droverv1.NewJobServiceClient(conn).Evaluations(ctx, &droverv1.ListJobEvaluationsRequest{JobId: job.GetId()})
		if err != nil {
			return 0, false, err
		}
		for _, ev := range evals.GetEvaluations() {
			// Delayed follow-ups (the disconnect window's end) wait.
			if ev.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_PENDING && ev.GetWaitUntil() <= time.Now().UnixNano() {
				return 0, false, nil
			}
		}
		return newest, true, nil
	})
}

// waitFor polls check until it reports done, fails, or ctx ends.
func waitFor[T any](ctx context.Context, what string, check func() (T, bool, error)) (T, error) {
	var lastErr error
	for {
		v, done, err := check()
		if done && err == nil {
			return v, nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), lastErr)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func seedNode(class string) *droverv1.Node {
	n := mock.Node()
	n.NodeClass = class
	return n
}

// seedJob is a service job that tolerates disconnects for longer than the
// test runs, pinned to the seed's nodes by their class.
func seedJob(rc reconnectCase, class string) *droverv1.Job {
	j := mock.Job(rc.count)
	j.Id = "reconnect-" + strconv.FormatUint(rc.seed, 10)
	j.Constraints = []*droverv1.Constraint{{
		Attribute: "node.class", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: class,
	}}
	g := j.GetTaskGroups()[0]
	g.MaxClientDisconnect = durationpb.New(time.Hour)
	g.ReconnectStrategy = rc.strategy
	return j
}

// isRunningWanted reports whether the servers want the allocation running
// and its agent reports it running.
func isRunningWanted(a *droverv1.Allocation) bool {
	return !a.ServerTerminal() && a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
}

// filterAllocs returns the allocations keep holds for, in order.
func filterAllocs(allocs []*droverv1.Allocation, keep func(*droverv1.Allocation) bool) []*droverv1.Allocation {
	var out []*droverv1.Allocation
	for _, a := range allocs {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

// currentIndex is the raft index the server has applied.
func currentIndex(ctx context.Context, conn grpc.ClientConnInterface) (uint64, error) {
	resp, err := droverv1.NewOperatorServiceClient(conn).StateDigest(ctx, &droverv1.StateDigestRequest{})
	return resp.GetIndex(), err
}
