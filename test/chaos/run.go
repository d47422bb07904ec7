package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// settleWait bounds the wait for scheduling to finish after the clients
// stop: a few times the servers' -eval-nack-timeout.
const settleWait = time.Minute

// Config sizes one run of a fault.
type Config struct {
	Bin  string
	Seed uint64
	// Rounds is how many times the fault is injected and healed.
	Rounds int
	// Hold is how long a fault stays in place (pauses draw from 1s to Hold).
	Hold time.Duration
	// Calm is how long the clients run between faults, and before the first.
	Calm    time.Duration
	Clients int
	Keys    int
	// Artifacts is the directory a failing run writes its history,
	// porcupine's visualization and the servers' logs into.
	Artifacts string
	// CheckTimeout bounds porcupine's search.
	CheckTimeout time.Duration
}

// Result is what a run measured, for docs/reliability.md.
type Result struct {
	Fault        string
	Seed         uint64
	Rounds       int
	Ops          int
	Summary      Summary
	Linearizable porcupine.CheckResult
	// Allocs is how many allocations the servers hold at the end (placed
	// by the fleet's jobs while the faults ran), checked for the placement
	// invariants.
	Allocs   int
	Duration time.Duration
}

// Run runs clients against a fresh cluster while the fault is injected
// cfg.Rounds times, heals, and checks the history and the servers' state. A
// failure writes the artifacts and names the seed.
func Run(t *testing.T, f Fault, cfg Config) Result {
	t.Helper()
	start := time.Now()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xc4a05))
	opts := append([]cluster.Option{
		cluster.Autopilot(2*time.Second, time.Minute),
		// Evaluations a cut-off worker held go to another after 10s rather
		// than the production 60s, so that scheduling settles soon after
		// a heal.
		cluster.Args("-eval-nack-timeout", "10s"),
	}, f.Options...)
	c := cluster.New(t, cfg.Bin, f.Servers, opts...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(cfg.Rounds)*(cfg.Hold+cfg.Calm+time.Minute)+3*time.Minute)
	defer cancel()
	c.WaitLeader(ctx)

	var notes []string
	h := NewHistory()
	env := &Env{T: t, Cluster: c, Rng: rng, Note: func(format string, args ...any) {
		msg := fmt.Sprintf("%8.3fs ", float64(h.Now())/1e9) + fmt.Sprintf(format, args...)
		notes = append(notes, msg)
		t.Logf("nemesis: %s", msg)
	}}
	w := &Workload{Cluster: c, History: h, Clients: cfg.Clients, Keys: cfg.Keys, Seed: rng.Uint64()}
	fleet, err := StartFleet(ctx, c, rng.Uint64())
	if err != nil {
		t.Fatalf("start the simulated fleet: %v", err)
	}
	defer fleet.Stop()
	clientsCtx, stopClients := context.WithCancel(ctx)
	clientsDone := make(chan struct{})
	go func() {
		defer close(clientsDone)
		w.Run(clientsCtx)
	}()
	artifacts := func(reason string, ops []Op, info *porcupine.LinearizationInfo) {
		t.Helper()
		dir := writeArtifacts(t, c, cfg, f, ops, notes, info)
		t.Errorf("%s\n  fault %s, seed %d; history, visualization and server logs in %s\n  rerun: DROVER_CHAOS_SEED=%d go test -run 'TestChaos/%s' ./test/chaos/",
			reason, f.Name, cfg.Seed, dir, cfg.Seed, f.Name)
	}
	defer func() {
		stopClients()
		<-clientsDone
	}()

	hold(ctx, cfg.Calm)
	for round := range cfg.Rounds {
		env.Note("round %d of %d", round+1, cfg.Rounds)
		f.Inject(ctx, env, cfg.Hold)
		env.Note("healed")
		hold(ctx, cfg.Calm)
	}
	stopClients()
	<-clientsDone
	fleet.Stop()

	// The placement invariants hold once scheduling has caught up with the
	// last writes (a count just lowered is over its allocations until its
	// evaluation runs).
	leader := c.WaitLeader(ctx, c.Live()...)
	settled := time.Now().Add(settleWait)
	for {
		n, err := pendingEvals(ctx, leader)
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(settled) {
			t.Errorf("scheduling did not settle within %s after the clients stopped: %d evaluations pending (%v)", settleWait, n, err)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.WaitConverged(ctx)
	live := c.Live()
	var readErrs []error
	readErrs = append(readErrs, w.FinalReads(ctx, cfg.Clients, live, &droverv1.QueryOptions{}, "final consistent")...)
	readErrs = append(readErrs, w.FinalReads(ctx, cfg.Clients+1, live, &droverv1.QueryOptions{AllowStale: true}, "final stale")...)
	ops := h.Ops()
	res := Result{Fault: f.Name, Seed: cfg.Seed, Rounds: cfg.Rounds, Ops: len(ops), Summary: Summarize(ops)}
	for _, err := range readErrs {
		t.Error(err)
	}
	for _, problem := range refusals(ops) {
		t.Error(problem)
	}
	for _, problem := range missingAcked(ops, w.AckedKeys(), live) {
		t.Error(problem)
	}
	violations, allocs := checkInvariants(ctx, live)
	for _, err := range violations {
		t.Error(err)
	}
	res.Allocs = allocs
	verdict, info := Linearizable(ops, cfg.CheckTimeout)
	res.Linearizable = verdict
	switch verdict {
	case porcupine.Illegal:
		artifacts("history is not linearizable", ops, &info)
	case porcupine.Unknown:
		artifacts(fmt.Sprintf("linearizability check gave up after %s", cfg.CheckTimeout), ops, &info)
	}
	if t.Failed() && verdict == porcupine.Ok {
		artifacts("checks failed", ops, nil)
	}
	res.Duration = time.Since(start)
	t.Logf("%s seed %d: %d rounds, %d ops (%d writes acknowledged, %d unknown, %d reads), %s; %d allocations checked; in %s",
		f.Name, cfg.Seed, cfg.Rounds, res.Ops, res.Summary.AckedWrites, res.Summary.UnknownWrites, res.Summary.Reads,
		verdict, res.Allocs, res.Duration.Round(time.Second))
	return res
}

// refusals lists writes the servers refused outright: the workload sends
// only valid requests.
func refusals(ops []Op) []string {
	var out []string
	for _, op := range ops {
		if strings.HasPrefix(op.Note, "refused: ") {
			out = append(out, fmt.Sprintf("write of %s to %s %s", op.Key, op.Server, op.Note))
		}
	}
	return out
}

// missingAcked checks that every register with an acknowledged write holds
// a value in every server's final stale read (which the linearizability
// check then ties to the writes).
func missingAcked(ops []Op, acked []string, servers []*cluster.Server) []string {
	final := map[string]map[string]string{} // server -> key -> value
	for _, op := range ops {
		if op.Kind == Read && op.Note == "final stale" {
			if final[op.Server] == nil {
				final[op.Server] = map[string]string{}
			}
			final[op.Server][op.Key] = op.Value
		}
	}
	sort.Strings(acked)
	var out []string
	for _, s := range servers {
		for _, k := range acked {
			if final[s.ID()][k] == "" {
				out = append(out, fmt.Sprintf("register %s had an acknowledged write but is empty on %s", k, s))
			}
		}
	}
	return out
}

// writeArtifacts saves what a failed run needs for diagnosis and returns
// the directory.
func writeArtifacts(t *testing.T, c *cluster.Cluster, cfg Config, f Fault, ops []Op, notes []string, info *porcupine.LinearizationInfo) string {
	dir := filepath.Join(cfg.Artifacts, fmt.Sprintf("%s-seed%d-%s", f.Name, cfg.Seed, time.Now().Format("150405")))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("artifacts: %v", err)
		return dir
	}
	if err := WriteJSON(filepath.Join(dir, "history.json"), ops); err != nil {
		t.Logf("artifacts: %v", err)
	}
	if info != nil {
		if err := Visualize(*info, filepath.Join(dir, "history.html")); err != nil {
			t.Logf("artifacts: visualization: %v", err)
		}
	}
	_ = os.WriteFile(filepath.Join(dir, "nemesis.txt"), []byte(strings.Join(notes, "\n")+"\n"), 0o644)
	for _, s := range c.Servers() {
		if data, err := os.ReadFile(s.LogFile()); err == nil {
			_ = os.WriteFile(filepath.Join(dir, filepath.Base(s.LogFile())), data, 0o644)
		}
	}
	return dir
}
