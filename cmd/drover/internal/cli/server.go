package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/droverhq/drover/internal/gcfloor"
	"github.com/droverhq/drover/internal/raftmetrics"
	"github.com/droverhq/drover/internal/tlsconfig"
	"github.com/droverhq/drover/internal/version"
	"github.com/droverhq/drover/server"
)

// serverOptions are the settings of `drover server`.
type serverOptions struct {
	cfg       server.Config
	logLevel  string
	logFormat string
	// gcHeapFloor is the heap size below which the Go collector does not
	// start (internal/gcfloor); 0 leaves GOGC alone.
	gcHeapFloor uint64
}

// defaultGCHeapFloor lets a server's heap reach 1 GiB before the collector
// runs: a small part of what a control-plane server is given, and it cut
// the servers' CPU per allocation in the c1m benchmark (docs/benchmarks.md).
const defaultGCHeapFloor = 1 << 30

// serverFlags defines the flags of `drover server` on a new flag set.
func serverFlags(stderr io.Writer) (*flag.FlagSet, *serverOptions) {
	fs := flag.NewFlagSet("drover server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := &serverOptions{cfg: server.DefaultConfig(), gcHeapFloor: defaultGCHeapFloor}
	cfg := &opts.cfg
	fs.BoolVar(&cfg.Dev, "dev", false, "run a single throwaway server: data in a temporary directory, bootstrapped at once")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for the raft log, snapshots and server id (required unless -dev)")
	fs.Func("data-dir-reserve", "free space kept on the data dir's file system (such as 64MiB or 1GB); below it the server refuses writes and hands leadership over until space is freed; 0 waits for a write to fail (default "+formatSize(cfg.DataDirReserve)+")", func(v string) error {
		n, err := parseSize(v)
		cfg.DataDirReserve = n
		return err
	})
	fs.BoolVar(&cfg.RebuildFromPeers, "rebuild-from-peers", false, "if the data dir fails its start-up checks, set the damaged state aside (kept, renamed) and rejoin the cluster (-join) as a new, empty member with the same id instead of refusing to start")
	fs.StringVar(&cfg.ServerID, "server-id", "", "raft id of this server (default: stored in the data dir, generated on first start)")
	fs.StringVar(&cfg.RPCAddr, "rpc-addr", cfg.RPCAddr, "gRPC listen address for agents, operators and other servers")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", cfg.RaftAddr, "raft transport listen address")
	fs.StringVar(&cfg.AdvertiseHost, "advertise", "", "host other servers and agents reach this server on (required when listening on all interfaces)")
	fs.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", "host:port other servers reach this server's raft transport on, when it differs from -raft-addr (a forwarded port)")
	fs.IntVar(&cfg.RaftMultiplier, "raft-multiplier", cfg.RaftMultiplier, "scale raft's heartbeat, election and lease timeouts (1-10); higher rides out stalls, fails over slower")
	fs.BoolVar(&cfg.Bootstrap, "bootstrap", false, "with no raft state, bootstrap a cluster of just this server")
	fs.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 0, "with no raft state, form a new cluster once this many servers (found through -join) are up")
	fs.Func("join", "comma-separated gRPC addresses (host:port) of other servers, to form a cluster or join a running one", func(v string) error {
		for _, addr := range strings.Split(v, ",") {
			if addr = strings.TrimSpace(addr); addr != "" {
				cfg.Join = append(cfg.Join, addr)
			}
		}
		return nil
	})
	fs.IntVar(&cfg.Limits.MaxConnsPerIP, "rpc-max-conns-per-ip", cfg.Limits.MaxConnsPerIP, "gRPC connections one remote address may hold open; more are closed at accept (count agents behind one NAT address)")
	fs.IntVar(&cfg.Limits.MaxStreamsPerConn, "rpc-max-streams-per-conn", cfg.Limits.MaxStreamsPerConn, "calls in flight on one gRPC connection (blocking GetAllocs included); a client queues calls beyond it")
	fs.DurationVar(&cfg.Limits.KeepaliveMinTime, "rpc-keepalive-min-time", cfg.Limits.KeepaliveMinTime, "shortest keepalive ping interval a client may use before it is disconnected (at most 30s, drover's own clients' interval)")
	fs.BoolVar(&cfg.Limits.KeepalivePermitWithoutStream, "rpc-keepalive-permit-without-stream", cfg.Limits.KeepalivePermitWithoutStream, "allow keepalive pings on connections with no call in flight, as idle agents send them")
	fs.IntVar(&cfg.Limits.MaxAgentCalls, "rpc-max-agent-calls", cfg.Limits.MaxAgentCalls, "agents' calls (register, heartbeat, allocation reports and polls) in flight; more are refused RESOURCE_EXHAUSTED")
	fs.IntVar(&cfg.Limits.MaxListCalls, "rpc-max-list-calls", cfg.Limits.MaxListCalls, "operators' whole-table reads (List calls, job allocations and evaluations, the state digest) in flight; more are refused RESOURCE_EXHAUSTED; the default is GOMAXPROCS, one per core")
	fs.IntVar(&cfg.Limits.MaxOperatorCalls, "rpc-max-operator-calls", cfg.Limits.MaxOperatorCalls, "operators' other calls (reads of one object, writes) in flight; more are refused RESOURCE_EXHAUSTED")
	fs.DurationVar(&cfg.LeaderHoldTimeout, "leader-hold-timeout", cfg.LeaderHoldTimeout, "how long a call waits for a leader during an election before failing UNAVAILABLE")
	fs.BoolVar(&cfg.Autopilot.CleanupDeadServers, "cleanup-dead-servers", cfg.Autopilot.CleanupDeadServers, "remove servers unreachable for -dead-server-after from the raft configuration")
	fs.DurationVar(&cfg.Autopilot.DeadServerAfter, "dead-server-after", cfg.Autopilot.DeadServerAfter, "how long a server must be unreachable to count as failed")
	fs.DurationVar(&cfg.Autopilot.ServerStabilizationTime, "server-stabilization-time", cfg.Autopilot.ServerStabilizationTime, "how long a joining server must be healthy before it becomes a voter")
	fs.DurationVar(&cfg.Autopilot.UpdateInterval, "autopilot-update-interval", cfg.Autopilot.UpdateInterval, "how often the leader measures every server's health")
	fs.DurationVar(&cfg.Autopilot.ReconcileInterval, "autopilot-reconcile-interval", cfg.Autopilot.ReconcileInterval, "how often the leader promotes stable servers and removes dead ones")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "serve the HTTP API (/v1/...), its OpenAPI document (/v1/openapi.json), the web UI (/ui/) and Prometheus metrics (/metrics) on this address (off when empty)")
	fs.BoolVar(&cfg.EnablePprof, "enable-pprof", cfg.EnablePprof, "also serve Go profiles at /debug/pprof/ on -http-addr")
	fs.StringVar(&cfg.InfoFile, "info-file", "", "write the server id and bound addresses to this file (JSON) once serving")
	fs.Uint64Var(&cfg.SnapshotThreshold, "snapshot-threshold", cfg.SnapshotThreshold, "raft entries between snapshots")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", cfg.SnapshotInterval, "how often raft checks whether to snapshot")
	fs.Uint64Var(&cfg.TrailingLogs, "trailing-logs", cfg.TrailingLogs, "raft entries kept after a snapshot, for followers that lag")
	fs.DurationVar(&cfg.UpdateAllocBatchInterval, "update-alloc-batch", cfg.UpdateAllocBatchInterval, "window in which agents' allocation reports share one raft entry")
	fs.DurationVar(&cfg.Heartbeat.MinTTL, "heartbeat-min-ttl", cfg.Heartbeat.MinTTL, "shortest heartbeat interval handed to nodes")
	fs.Float64Var(&cfg.Heartbeat.MaxPerSecond, "heartbeat-max-per-second", cfg.Heartbeat.MaxPerSecond, "heartbeat rate the servers aim to stay under as the fleet grows")
	fs.DurationVar(&cfg.Heartbeat.Grace, "heartbeat-grace", cfg.Heartbeat.Grace, "extra time past a node's TTL before it is marked")
	fs.DurationVar(&cfg.Heartbeat.FailoverTTL, "failover-heartbeat-ttl", cfg.Heartbeat.FailoverTTL, "time every node gets to find a newly elected leader")
	fs.Float64Var(&cfg.Heartbeat.MassFailureFraction, "heartbeat-mass-failure-fraction", cfg.Heartbeat.MassFailureFraction, "share of nodes missing heartbeats within the window that makes the leader mark them slowly (0 disables)")
	fs.DurationVar(&cfg.Heartbeat.MassFailureWindow, "heartbeat-mass-failure-window", cfg.Heartbeat.MassFailureWindow, "window over which missed heartbeats count towards a mass failure")
	fs.IntVar(&cfg.Heartbeat.MassFailureMinNodes, "heartbeat-mass-failure-min-nodes", cfg.Heartbeat.MassFailureMinNodes, "fewest missed heartbeats in the window that count as a mass failure")
	fs.Float64Var(&cfg.Heartbeat.ThrottledMarkRate, "heartbeat-throttled-rate", cfg.Heartbeat.ThrottledMarkRate, "nodes per second marked during a mass failure")
	fs.DurationVar(&cfg.GC.Interval, "gc-interval", cfg.GC.Interval, "how often the leader collects garbage")
	fs.DurationVar(&cfg.GC.Thresholds.Node, "node-gc-threshold", cfg.GC.Thresholds.Node, "age after which a down node with only terminal allocations is deleted")
	fs.DurationVar(&cfg.GC.Thresholds.Eval, "eval-gc-threshold", cfg.GC.Thresholds.Eval, "age after which terminal evaluations and allocations are deleted")
	fs.DurationVar(&cfg.GC.Thresholds.BatchEval, "batch-eval-gc-threshold", cfg.GC.Thresholds.BatchEval, "the same for batch jobs")
	fs.DurationVar(&cfg.GC.Thresholds.Job, "job-gc-threshold", cfg.GC.Thresholds.Job, "age after which a stopped or finished job is deleted")
	fs.IntVar(&cfg.Scheduler.NumWorkers, "num-schedulers", cfg.Scheduler.NumWorkers, "scheduler workers on this server (0 schedules nothing here)")
	fs.Func("schedulers", "comma-separated scheduler types this server's workers take (default service,batch,system)", func(v string) error {
		types, err := ParseSchedulerTypes(v)
		cfg.Scheduler.Schedulers = types
		return err
	})
	fs.Func("alloc-cidr", "network every allocation takes one address from; the same on every server (default "+server.DefaultAllocCIDR.String()+")", func(v string) error {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return err
		}
		cfg.Scheduler.AllocCIDR = p.Masked()
		return nil
	})
	fs.DurationVar(&cfg.Scheduler.Broker.NackTimeout, "eval-nack-timeout", cfg.Scheduler.Broker.NackTimeout, "how long a worker may hold an evaluation before the broker hands it to another")
	fs.IntVar(&cfg.Scheduler.Broker.DeliveryLimit, "eval-delivery-limit", cfg.Scheduler.Broker.DeliveryLimit, "deliveries of an evaluation before it is marked failed")
	fs.StringVar(&cfg.TLS.CAFile, "tls-ca-file", "", "PEM file of the cluster CA; with -tls-cert-file and -tls-key-file, all traffic uses mutual TLS")
	fs.StringVar(&cfg.TLS.CertFile, "tls-cert-file", "", "PEM file of this server's certificate (DNS SAN "+tlsconfig.ServerName+")")
	fs.StringVar(&cfg.TLS.KeyFile, "tls-key-file", "", "PEM file of the private key of -tls-cert-file")
	fs.BoolVar(&cfg.ACLEnabled, "acl-enabled", false, "enforce access control: operator calls need a token (set on every server; docs/security.md)")
	fs.StringVar(&cfg.AuditLog, "audit-log", "", "append one JSON line per write call and per refused call to this file (reopened on SIGHUP)")
	heapFloorFlag(fs, &opts.gcHeapFloor, "heap size the Go collector lets the server reach before it runs (such as 512MiB); above half of it GOGC applies as set; capped at a quarter of the memory available and half of GOMEMLIMIT; 0 turns it off")
	fs.StringVar(&opts.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&opts.logFormat, "log-format", "text", "log format: text or json")
	return fs, opts
}

// heapFloorFlag defines -gc-heap-floor, a size, into dst (which holds the
// default); drover server and drover bench share it.
func heapFloorFlag(fs *flag.FlagSet, dst *uint64, usage string) {
	fs.Func("gc-heap-floor", usage+" (default "+formatSize(*dst)+")", func(v string) error {
		n, err := parseSize(v)
		*dst = n
		return err
	})
}

// serverEnvOptions let every flag also be set as DROVER_<FLAG>.
func serverEnvOptions() []ff.Option { return []ff.Option{ff.WithEnvVarPrefix("DROVER")} }

func serverCommand(stderr io.Writer) *ffcli.Command {
	fs, opts := serverFlags(stderr)
	return &ffcli.Command{
		Name:       "server",
		ShortUsage: "drover server [flags]",
		ShortHelp:  "Run a drover server.",
		LongHelp: "Run a drover server. Every flag can also be set in the environment as DROVER_<FLAG>,\n" +
			"e.g. DROVER_DATA_DIR for -data-dir; flags win over the environment.",
		FlagSet: fs,
		Options: serverEnvOptions(),
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected arguments: %s", strings.Join(args, " "))
			}
			logger, err := newLogger(stderr, opts.logLevel, opts.logFormat)
			if err != nil {
				return err
			}
			opts.cfg.Logger = logger
			floorCtx, stopFloor := context.WithCancel(ctx)
			defer stopFloor()
			go gcfloor.Run(floorCtx, opts.gcHeapFloor, logger)
			return runServer(ctx, opts.cfg, logger)
		},
	}
}

// runServer runs until SIGINT or SIGTERM, then shuts down cleanly. A second
// signal exits at once. A server that stops applying the raft log (it met
// an entry its release cannot apply) shuts down too, and runServer returns
// the reason, so the process exits non-zero naming it. SIGHUP reloads what
// can change without a restart (see onReload) and never stops the server.
func runServer(ctx context.Context, cfg server.Config, logger *slog.Logger) error {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	// SIGHUP is caught from the start, even before the server is up: its
	// default action would end the process. One that comes while the
	// server starts waits in the channel and is handled once it runs.
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	defer signal.Stop(hangups)

	logger.Info("starting", "version", version.String())
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	if err := raftmetrics.Install(srv.Registry()); err != nil {
		logger.Warn("raft's own metrics are not exported", "err", err)
	}
	running := &runningServer{srv: srv, logger: logger}
	var halt error
wait:
	for {
		select {
		case <-hangups:
			running.onReload()
		case sig := <-signals:
			logger.Info("received signal; shutting down", "signal", sig.String())
			break wait
		case <-ctx.Done():
			break wait
		case <-srv.Halted():
			halt = srv.HaltReason()
			logger.Error("this server stopped applying the raft log; shutting down", "reason", halt)
			break wait
		}
	}
	go func() {
		sig := <-signals
		logger.Warn("received a second signal; exiting without a clean shutdown", "signal", sig.String())
		os.Exit(1)
	}()
	err = srv.Shutdown(context.Background())
	if halt != nil {
		return errors.Join(fmt.Errorf("server halted: %w", halt), err)
	}
	return err
}

// runningServer is a started server and what the process's signals do to
// it besides stopping it.
type runningServer struct {
	srv    *server.Server
	logger *slog.Logger
}

// onReload is what SIGHUP does: read again whatever the server can take
// without a restart. Each step logs its own outcome; a step that fails
// leaves the server as it was, and the server keeps running whatever
// happens. The steps: the TLS files, and the audit log reopened at its
// path (for logrotate).
func (r *runningServer) onReload() {
	r.logger.Info("received SIGHUP; reloading")
	var errs []error
	if err := r.srv.ReloadTLS(); err != nil {
		errs = append(errs, fmt.Errorf("TLS: %w", err))
	}
	if err := r.srv.ReopenAuditLog(); err != nil {
		errs = append(errs, fmt.Errorf("audit log: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		r.logger.Warn("reload incomplete; the server keeps running with what it had", "err", err)
	}
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want text or json", format)
}
