package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/droverhq/drover/internal/tlsconfig"
	"github.com/droverhq/drover/internal/version"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/server/autopilot"
	"github.com/droverhq/drover/server/broker"
	"github.com/droverhq/drover/server/gc"
	"github.com/droverhq/drover/server/heartbeat"
)

// Config configures one drover server.
type Config struct {
	// ServerID is the server's raft id. Empty means the id stored in the
	// data dir, or a new random one stored there on first start.
	ServerID string
	// DataDir holds the raft log, snapshots and the server id. Required
	// unless Dev is set.
	DataDir string
	// Dev runs a throwaway single server: data in a temporary directory
	// removed on shutdown, bootstrapped at once.
	Dev bool
	// DataDirReserve is the free space, in bytes, kept on the data dir's
	// file system (64 MiB): below it the server refuses writes (UNAVAILABLE
	// naming the server and data dir), stops appending to its raft log and
	// taking snapshots, and a leader hands leadership to a server with
	// space, so that raft can still record terms and votes. Service resumes
	// by itself once space is freed. 0 refuses writes only after one
	// failed for lack of space.
	DataDirReserve uint64
	// RebuildFromPeers makes a server whose data dir fails its start-up
	// checks set its state aside (renamed, kept), leave the raft
	// configuration and join again as a new, empty member with the same id,
	// which the leader brings up to date, instead of refusing to start. It
	// needs Join and a cluster with a leader that keeps its quorum without
	// this server. With an intact data dir it does nothing.
	RebuildFromPeers bool
	// Bootstrap makes a server with no raft state bootstrap a cluster of
	// just itself. A server with state never bootstraps again.
	Bootstrap bool
	// BootstrapExpect is the number of servers of a new cluster. A server
	// with no raft state asks the Join addresses for their raft ids and
	// addresses and bootstraps once it knows exactly this many servers
	// without state. Zero means the server joins an existing cluster.
	BootstrapExpect int
	// Join lists gRPC addresses of other servers, used to form a cluster
	// (with BootstrapExpect) or to join a running one.
	Join []string
	// RPCAddr is the gRPC listen address (127.0.0.1:4650); port 0 picks a
	// free port.
	RPCAddr string
	// RPCListener, if set, is used for gRPC instead of listening on
	// RPCAddr, for callers that must know every server's address before
	// any server starts (tests forming a cluster, socket activation). The
	// server closes it on shutdown.
	RPCListener net.Listener
	// RaftAddr is the raft transport's listen address (127.0.0.1:4651).
	RaftAddr string
	// AdvertiseHost is the host other servers and agents reach this server
	// on, required when the listen addresses bind all interfaces.
	AdvertiseHost string
	// RaftAdvertise, if set, is the full host:port other servers reach this
	// server's raft transport on, for a raft port that is forwarded or
	// proxied (NAT, a port map). It overrides AdvertiseHost for raft.
	RaftAdvertise string
	// RaftMultiplier scales raft's heartbeat, election and leader lease
	// timeouts (1 = hashicorp/raft's defaults, at most 10), as Consul's
	// raft_multiplier does: higher values tolerate slow disks, loaded
	// machines or long network stalls at the price of slower failover.
	RaftMultiplier int
	// HTTPAddr, if set, is where Prometheus metrics are served (/metrics);
	// port 0 picks a free port. Empty turns HTTP off.
	HTTPAddr string
	// EnablePprof also serves Go's profiles at /debug/pprof/ on HTTPAddr.
	EnablePprof bool
	// InfoFile, if set, is written (atomically, as JSON) with the server id
	// and the bound addresses once the server is serving.
	InfoFile string

	Logger *slog.Logger

	// Version is the release this server runs as: it announces it to the
	// cluster, and its FSM knows only the raft entry types of that release
	// and earlier ones. Empty means the binary's own
	// (internal/version.Version, set at build time with -ldflags -X).
	// Tests set it to run servers of several releases in one process.
	Version string

	// Heartbeat is the heartbeat policy handed to nodes.
	Heartbeat heartbeat.Config
	// ApplyTimeout bounds how long a write waits to enter the raft log (30s).
	ApplyTimeout time.Duration
	// UpdateAllocBatchInterval is the window in which agents' allocation
	// reports share one raft entry (50ms).
	UpdateAllocBatchInterval time.Duration
	// EventBufferSize is how many events the event stream keeps for
	// subscribers that start from an earlier index (16384).
	EventBufferSize int
	// Raft snapshots: entries between snapshots (8192), how often to check
	// (2m) and how many entries to keep after one (10240).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// ShutdownTimeout bounds how long calls in flight may take to finish
	// when the server stops (10s).
	ShutdownTimeout time.Duration
	// LeaderHoldTimeout is how long a call that needs the leader waits for
	// one during an election before failing UNAVAILABLE (5s).
	LeaderHoldTimeout time.Duration
	// Limits bound connections per address, calls per connection and the
	// agents' and operators' calls in flight.
	Limits rpc.Limits
	// Autopilot tunes server health tracking and dead-server cleanup.
	Autopilot AutopilotConfig
	// Scheduler tunes the scheduler workers and the leader's eval broker.
	Scheduler SchedulerConfig
	// GC tunes the leader's garbage collection.
	GC GCConfig
	// TLS, when set, runs all of this server's traffic over mutual TLS: the
	// gRPC listener, its calls to other servers and its own endpoint, and
	// raft. Its certificate must be a server certificate (DNS SAN
	// tlsconfig.ServerName). Unset, everything is plaintext and unchecked:
	// for development and trusted networks only.
	TLS tlsconfig.Config
	// ACLEnabled turns access control on: operator calls then need a
	// token (docs/security.md). Every server of a cluster must agree.
	ACLEnabled bool
	// AuditLog, if set, is the file the audit trail is appended to: one
	// JSON line per write call and per refused call.
	AuditLog string
}

// SchedulerConfig tunes scheduling.
type SchedulerConfig struct {
	// NumWorkers is how many scheduler workers this server runs (one per
	// CPU). Zero is allowed: the server then schedules nothing itself.
	NumWorkers int
	// Schedulers are the scheduler types this server's workers take
	// (service, batch, system).
	Schedulers []droverv1.JobType
	// AllocCIDR is the cluster's allocation network: every allocation gets
	// one address from it (100.64.0.0/10). It must be the same on every
	// server.
	AllocCIDR netip.Prefix
	// Broker tunes the leader's eval broker.
	Broker broker.Config
}

// GCConfig tunes garbage collection on the leader.
type GCConfig struct {
	// Thresholds are the ages after which objects are collected.
	Thresholds gc.Thresholds
	// Interval is how often the leader collects (5m).
	Interval time.Duration
	// BatchSize bounds the ids deleted by one raft entry (1000).
	BatchSize int
}

// DefaultDataDirReserve is the free space kept on the data dir's file
// system unless configured.
const DefaultDataDirReserve = 64 << 20

// MaxRaftMultiplier bounds RaftMultiplier: at 10 a failover already takes
// tens of seconds.
const MaxRaftMultiplier = 10

// DefaultAllocCIDR is the allocation network unless configured: the
// shared address space of RFC 6598, 4 million addresses that rarely clash
// with a site's own private networks.
var DefaultAllocCIDR = netip.MustParsePrefix("100.64.0.0/10")

// AutopilotConfig tunes raft-autopilot on the leader.
type AutopilotConfig struct {
	// CleanupDeadServers removes servers that stayed unreachable for
	// DeadServerAfter from the raft configuration, as long as quorum allows
	// (true).
	CleanupDeadServers bool
	// DeadServerAfter is how long a server must be unreachable to count as
	// failed (5m).
	DeadServerAfter time.Duration
	// ServerStabilizationTime is how long a joining server must be healthy
	// before it is promoted to voter (10s).
	ServerStabilizationTime time.Duration
	// LastContactThreshold is the longest a healthy follower may go without
	// contact from the leader (200ms).
	LastContactThreshold time.Duration
	// MaxTrailingLogs is how many entries a healthy follower may lag (250).
	MaxTrailingLogs uint64
	// UpdateInterval is how often server health is measured (2s), and
	// ReconcileInterval how often promotions and removals are decided
	// (10s).
	UpdateInterval    time.Duration
	ReconcileInterval time.Duration
}

// DefaultConfig returns the configuration of a server on loopback with the
// defaults `drover server -h` prints (Nomad's, where both have the knob).
func DefaultConfig() Config {
	return Config{
		RPCAddr:                  "127.0.0.1:4650",
		RaftAddr:                 "127.0.0.1:4651",
		Heartbeat:                heartbeat.DefaultConfig(),
		ApplyTimeout:             30 * time.Second,
		UpdateAllocBatchInterval: 50 * time.Millisecond,
		EventBufferSize:          16384,
		SnapshotThreshold:        8192,
		SnapshotInterval:         2 * time.Minute,
		TrailingLogs:             10240,
		ShutdownTimeout:          10 * time.Second,
		LeaderHoldTimeout:        5 * time.Second,
		RaftMultiplier:           1,
		Limits:                   rpc.DefaultLimits(),
		DataDirReserve:           DefaultDataDirReserve,
		Autopilot: AutopilotConfig{
			CleanupDeadServers:      true,
			DeadServerAfter:         autopilot.DefaultDeadServerAfter,
			ServerStabilizationTime: autopilot.DefaultServerStabilizationTime,
			LastContactThreshold:    autopilot.DefaultLastContactThreshold,
			MaxTrailingLogs:         autopilot.DefaultMaxTrailingLogs,
			UpdateInterval:          2 * time.Second,
			ReconcileInterval:       10 * time.Second,
		},
		Scheduler: SchedulerConfig{
			NumWorkers: runtime.NumCPU(),
			Schedulers: []droverv1.JobType{droverv1.JobType_JOB_TYPE_SERVICE, droverv1.JobType_JOB_TYPE_BATCH, droverv1.JobType_JOB_TYPE_SYSTEM},
			AllocCIDR:  DefaultAllocCIDR,
			Broker:     broker.DefaultConfig(),
		},
		GC: GCConfig{Thresholds: gc.DefaultThresholds(), Interval: 5 * time.Minute, BatchSize: gc.DefaultBatchSize},
	}
}

// versionPackage is where the build version is set.
const versionPackage = "github.com/droverhq/drover/internal/version"

// release is the release the server runs as.
func (c *Config) release() string {
	if c.Version != "" {
		return c.Version
	}
	return version.Version
}

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" && !c.Dev {
		errs = append(errs, errors.New("data dir: required unless in dev mode"))
	}
	for name, addr := range map[string]string{"rpc addr": c.RPCAddr, "raft addr": c.RaftAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, addr, err))
			continue
		}
		if ip := net.ParseIP(host); (host == "" || ip != nil && ip.IsUnspecified()) && c.AdvertiseHost == "" {
			errs = append(errs, fmt.Errorf("%s %q binds all interfaces: set the advertise host", name, addr))
		}
	}
	if c.RaftAdvertise != "" {
		if _, _, err := net.SplitHostPort(c.RaftAdvertise); err != nil {
			errs = append(errs, fmt.Errorf("raft advertise %q: %w", c.RaftAdvertise, err))
		}
	}
	if v := c.release(); !version.Valid(v) {
		errs = append(errs, fmt.Errorf("version %q: not a semantic version (build with -ldflags -X %s.Version=X.Y.Z)", v, versionPackage))
	}
	if c.RaftMultiplier < 1 || c.RaftMultiplier > MaxRaftMultiplier {
		errs = append(errs, fmt.Errorf("raft multiplier %d: must be between 1 and %d", c.RaftMultiplier, MaxRaftMultiplier))
	}
	// heartbeat's own messages name the setting, "heartbeat min TTL" and
	// the like, so they need no prefix.
	if err := c.Heartbeat.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.EnablePprof && c.HTTPAddr == "" {
		errs = append(errs, errors.New("enable pprof: needs an HTTP address"))
	}
	if c.GC.Interval <= 0 || c.GC.BatchSize <= 0 {
		errs = append(errs, errors.New("gc: interval and batch size must be positive"))
	}
	if c.ApplyTimeout <= 0 {
		errs = append(errs, errors.New("apply timeout: must be positive"))
	}
	errs = append(errs, c.validateCluster()...)
	if c.UpdateAllocBatchInterval <= 0 {
		errs = append(errs, errors.New("update alloc batch interval: must be positive"))
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateCluster checks the settings that form or join a cluster.
func (c *Config) validateCluster() []error {
	var errs []error
	switch {
	case c.BootstrapExpect < 0:
		errs = append(errs, errors.New("bootstrap expect: must not be negative"))
	case c.BootstrapExpect > 0 && (c.Bootstrap || c.Dev):
		errs = append(errs, errors.New("bootstrap expect: cannot be combined with bootstrap or dev mode"))
	case c.BootstrapExpect > 1 && len(c.Join) == 0:
		errs = append(errs, fmt.Errorf("bootstrap expect %d: needs the other servers' addresses in join", c.BootstrapExpect))
	}
	for _, addr := range c.Join {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("join address %q: %w", addr, err))
		}
	}
	if c.LeaderHoldTimeout <= 0 {
		errs = append(errs, errors.New("leader hold timeout: must be positive"))
	}
	if c.Autopilot.DeadServerAfter <= 0 || c.Autopilot.ServerStabilizationTime < 0 {
		errs = append(errs, errors.New("autopilot: dead server time must be positive and stabilization time not negative"))
	}
	return errs
}
