package cli

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/peterbourgon/ff/v3/ffcli"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/raftmetrics"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// sampleJob is the job `drover dev` registers; docs/examples/web.json is
// a copy (a test keeps them equal).
//
//go:embed examples/web.json
var sampleJob []byte

// devOptions are the flags of `drover dev`.
type devOptions struct {
	rpcAddr  string
	raftAddr string
	httpAddr string
	simNodes int
	logLevel string
	// tempRoot is where the data dir is made (os.TempDir when empty); a
	// test's own directory in tests.
	tempRoot string
}

func devFlags(stderr io.Writer) (*flag.FlagSet, *devOptions) {
	fs := flag.NewFlagSet("drover dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &devOptions{}
	fs.StringVar(&o.rpcAddr, "rpc-addr", defaultAddr, "gRPC listen address of the dev server")
	fs.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:4651", "raft listen address of the dev server")
	fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:4646", "HTTP API (/v1/...), web UI (/ui/) and Prometheus metrics (/metrics) listen address")
	fs.IntVar(&o.simNodes, "sim-nodes", 5, "number of simulated nodes")
	fs.StringVar(&o.logLevel, "log-level", "warn", "server log level: debug, info, warn or error")
	return fs, o
}

func devCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs, o := devFlags(stderr)
	return &ffcli.Command{
		Name:       "dev",
		ShortUsage: "drover dev [flags]",
		ShortHelp:  "Run a dev server, simulated nodes and a sample job, in the foreground.",
		LongHelp: "Start a throwaway dev server (data in a temporary directory), -sim-nodes\n" +
			"simulated agents against it, and register the sample job docs/examples/web.json;\n" +
			"then print where to look. Ctrl-C stops the agents, then the server, and removes\n" +
			"the data.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if o.simNodes < 1 {
				return fmt.Errorf("-sim-nodes %d: give a positive number of nodes", o.simNodes)
			}
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDev(ctx, o, stdout, stderr)
		},
	}
}

// runDev runs the dev server, the agents and the sample job until ctx
// ends, then stops the agents, the server, and removes the data dir.
func runDev(ctx context.Context, o *devOptions, stdout, stderr io.Writer) (err error) {
	logger, err := newLogger(stderr, o.logLevel, "text")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(o.tempRoot, "drover-dev-")
	if err != nil {
		return fmt.Errorf("create the dev data dir: %w", err)
	}
	defer func() {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove dev data dir %s: %w", dir, rmErr))
		}
	}()
	cfg := server.DefaultConfig()
	cfg.Dev, cfg.DataDir, cfg.Logger = true, dir, logger
	cfg.RPCAddr, cfg.RaftAddr, cfg.HTTPAddr = o.rpcAddr, o.raftAddr, o.httpAddr
	srv, err := server.New(cfg)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("a port drover dev needs is in use (another drover?); pick others with -rpc-addr, -raft-addr, -http-addr: %w", err)
		}
		return err
	}
	defer func() { err = errors.Join(err, srv.Shutdown(context.Background())) }()
	if err := raftmetrics.Install(srv.Registry()); err != nil {
		logger.Warn("raft's own metrics are not exported", "err", err)
	}

	fleetCfg := simagent.Config{
		Servers:      []string{srv.RPCAddr()},
		Nodes:        simagent.DefaultTemplate().Nodes(o.simNodes),
		StartDelay:   time.Second,
		BatchRunTime: 30 * time.Second,
	}
	fleet, err := simagent.NewFleet(fleetCfg)
	if err != nil {
		return err
	}
	// Deferred after the server's shutdown, so it runs first.
	defer fleet.Stop()
	if err := fleet.Start(ctx); err != nil {
		return err
	}
	// The sample job is registered once the nodes are ready, so that its
	// first evaluation places it rather than leaving it blocked.
	if err := waitNodesReady(ctx, fleet, o.simNodes); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	job, err := parseJob(sampleJob)
	if err != nil {
		return fmt.Errorf("the sample job: %w", err)
	}
	if err := registerSample(ctx, srv.RPCAddr(), job); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	next := filepath.Join(dir, "web-v2.json")
	if err := os.WriteFile(next, nextSampleVersion(sampleJob), 0o600); err != nil {
		return fmt.Errorf("write the sample job's next version: %w", err)
	}
	printDevHelp(stdout, commandName(os.Args[0], exec.LookPath), srv.RPCAddr(), srv.HTTPAddr(), o.simNodes, job.GetId(), next)
	<-ctx.Done()
	fmt.Fprintln(stdout, "drover dev: stopping the agents and the server")
	return nil
}

// registerSample registers job on the dev server, retrying while the
// server has no leader yet.
func registerSample(ctx context.Context, addr string, job *droverv1.Job) error {
	conn, err := (&clientOptions{}).dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := droverv1.NewJobServiceClient(conn)
	req := &droverv1.RegisterJobRequest{Job: job, RequestId: uuid.NewString()}
	ctx, cancel := context.WithTimeout(ctx, defaultTimeout)
	defer cancel()
	for {
		_, err := client.Register(ctx, req)
		if err == nil {
			return nil
		}
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return fmt.Errorf("register the sample job %q: %w", job.GetId(), err)
		}
		if !waitOrDone(ctx, 100*time.Millisecond) {
			return fmt.Errorf("register the sample job %q: %w", job.GetId(), ctx.Err())
		}
	}
}

// waitOrDone waits d (a retry's backoff) unless ctx ends first.
func waitOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// nextSampleVersion is the sample job with more memory: a change that
// replaces its allocations, rolled out by its update block.
func nextSampleVersion(sample []byte) []byte {
	return bytes.Replace(sample, []byte(`"memory_mb": 256`), []byte(`"memory_mb": 384`), 1)
}

// commandName is how the dev banner names the binary so that its commands
// work as printed: as it was run (./bin/drover after `make run`) unless
// that is the drover on PATH; drover when run under another name (a test
// binary).
func commandName(arg0 string, lookPath func(string) (string, error)) string {
	if filepath.Base(arg0) != "drover" {
		return "drover"
	}
	if onPath, err := lookPath("drover"); err == nil && sameFile(onPath, arg0) {
		return "drover"
	}
	return arg0
}

func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// printDevHelp says where to look, and how to roll out the sample job's
// next version, written to nextFile; prog is the binary's name.
func printDevHelp(w io.Writer, prog, rpcAddr, httpAddr string, nodes int, jobID, nextFile string) {
	addrFlag := ""
	if rpcAddr != defaultAddr {
		addrFlag = " -address " + rpcAddr
	}
	text := fmt.Sprintf(`drover dev: a server on %s with %d simulated nodes, running the sample job %q.
Data is in a temporary directory, removed when you press Ctrl-C.

The web UI: http://%s/ui/

  drover job status%s %s
  drover node status%s
  drover eval list%s
  go run github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3 -plaintext -d '{}' %s drover.v1.EventService/Stream
  curl -s http://%s/v1/job/%s
  http://%s/metrics

Roll out its next version (more memory), one allocation at a time, each
healthy 2s after it starts, as its update block says:

  drover job plan%s %s
  drover job run%s %s
  drover deployment list%s

job run follows the rollout to its end; job status shows it too.
`, rpcAddr, nodes, jobID, httpAddr, addrFlag, jobID, addrFlag, addrFlag, rpcAddr, httpAddr, jobID, httpAddr,
		addrFlag, nextFile, addrFlag, nextFile, addrFlag)
	fmt.Fprint(w, strings.ReplaceAll(text, "\n  drover ", "\n  "+prog+" "))
}

// nodesReadyTimeout bounds the wait for the simulated nodes.
const nodesReadyTimeout = 30 * time.Second

// waitNodesReady waits until the fleet's agents have been told they are
// ready.
func waitNodesReady(ctx context.Context, fleet *simagent.Fleet, n int) error {
	ctx, cancel := context.WithTimeout(ctx, nodesReadyTimeout)
	defer cancel()
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		if fleet.Stats().NodeStatuses[droverv1.NodeStatus_NODE_STATUS_READY] >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d simulated nodes to be ready: %w", n, ctx.Err())
		case <-ticker.C:
		}
	}
}
