// Package server assembles one drover server: the state store and FSM, raft,
// the gRPC services, and the duties of the leader.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/audit"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/scheduler"
	"github.com/droverhq/drover/server/autopilot"
	"github.com/droverhq/drover/server/raftnode"
	"github.com/droverhq/drover/server/readindex"
)

// Server is one running drover server.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	id      string
	dataDir string

	// audit is the audit trail, nil without -audit-log.
	audit *audit.Log

	state    *state.StateStore
	events   *events.Broker
	fsm      *fsm.FSM
	gate     *versionGate
	raft     *raftnode.Node
	rpc      *rpc.Server
	listener net.Listener
	rpcAddr  string
	metrics  *prometheus.Registry
	instr    *instruments
	http     *httpServer
	security transportSecurity
	// portable checks the entries Apply proposes (backend.go).
	portable portableGate

	// establishedTerm is the raft term in which this server last became a
	// ready leader: leader, with every entry committed before it took over
	// applied. Zero once leadership is revoked. See leading.
	establishedTerm atomic.Uint64
	// reads confirms leadership for consistent reads; stalls tells it
	// whether this process was just stopped.
	reads  *readindex.Confirmer
	stalls *readindex.StallDetector

	leader     *leadership
	autopilot  *autopilot.Autopilot
	sched      *scheduling
	heartbeats *heartbeats
	gc         *garbageCollector
	workers    *workerPool
	peers      *peers
	forming    forming

	// usage is the node usage cache every scheduler of this server
	// shares (its workers' and job plans').
	usage *scheduler.UsageCache

	// lifetime ends when shutdown begins; background loops run under it.
	lifetime    context.Context
	endLifetime context.CancelFunc
	shutdownCh  chan struct{}
	// reassert asks monitorLeadership to stop and start the leader's
	// duties again, from the state as it is now (after a restore); it
	// closes the channel sent once done.
	reassert     chan chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
	wg           sync.WaitGroup
}

// New starts a server: it opens the data dir, restores the state from raft,
// and starts serving gRPC. Stop it with Shutdown.
func New(cfg Config) (s *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid server configuration: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	security, err := newTransportSecurity(cfg.TLS)
	if err != nil {
		return nil, err
	}
	s = &Server{cfg: cfg, logger: logger, security: security, shutdownCh: make(chan struct{}), reassert: make(chan chan struct{}), leader: newLeadership(), peers: newPeers(security.dial), usage: scheduler.NewUsageCache()}

	// Undo what was started if a later step fails. Cleanups must not read
	// s: the named result is nil by the time they run.
	var cleanups []func()
	defer func() {
		if err != nil {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}
	}()
	s.lifetime, s.endLifetime = context.WithCancel(context.Background())
	cleanups = append(cleanups, s.endLifetime, s.peers.close)

	if s.dataDir, err = openDataDir(cfg); err != nil {
		return nil, err
	}
	if cfg.Dev {
		dir := s.dataDir
		cleanups = append(cleanups, func() { _ = os.RemoveAll(dir) })
	}
	// A rebuilt server joins the cluster it left; it must never bootstrap
	// one of its own.
	rebuilt := false
	s.id, err = serverID(s.dataDir, cfg.ServerID)
	if errors.Is(err, raftnode.ErrDamaged) && cfg.RebuildFromPeers {
		s.id, err = s.rebuildFromPeers(err, "")
		rebuilt = err == nil
	}
	if err != nil {
		return nil, err
	}
	s.logger = logger.With("server", s.id)
	if s.state, err = state.NewStateStore(); err != nil {
		return nil, err
	}
	s.events = events.NewBroker(events.Config{MaxEvents: cfg.EventBufferSize})
	cleanups = append(cleanups, s.events.Close)

	if s.listener, err = rpcListener(cfg); err != nil {
		return nil, err
	}
	listener := s.listener
	cleanups = append(cleanups, func() { _ = listener.Close() })
	s.rpcAddr = advertised(s.listener.Addr().String(), cfg.AdvertiseHost)

	s.instr = newInstruments()
	s.sched = newScheduling(s)
	s.heartbeats = newHeartbeats(s)
	s.gc = &garbageCollector{s: s}
	release := cfg.release()
	s.fsm = fsm.New(s.state, s.events, s.logger.With("component", "fsm"))
	s.fsm.SetHooks(s.sched)
	s.fsm.SetRelease(fsm.Release{Version: release, Knows: func(t droverv1.MessageType) bool { return knows(release, t) }})

	raftAdvertise := cfg.RaftAdvertise
	if raftAdvertise == "" && cfg.AdvertiseHost != "" {
		raftAdvertise = net.JoinHostPort(cfg.AdvertiseHost, "0")
	}
	raftCfg := raftnode.Config{
		ServerID:          s.id,
		DataDir:           s.dataDir,
		BindAddr:          cfg.RaftAddr,
		AdvertiseAddr:     raftAdvertise,
		FSM:               s.fsm,
		Logger:            s.logger,
		Bootstrap:         (cfg.Bootstrap || cfg.Dev) && !rebuilt,
		SnapshotThreshold: cfg.SnapshotThreshold,
		SnapshotInterval:  cfg.SnapshotInterval,
		TrailingLogs:      cfg.TrailingLogs,
		TimingMultiplier:  cfg.RaftMultiplier,
		TLS:               s.security.raft,
		MinFreeSpace:      cfg.DataDirReserve,
	}
	s.raft, err = raftnode.New(raftCfg)
	switch {
	case errors.Is(err, raftnode.ErrDamaged) && cfg.RebuildFromPeers:
		if _, err = s.rebuildFromPeers(err, s.id); err == nil {
			raftCfg.Bootstrap = false
			s.raft, err = raftnode.New(raftCfg)
		}
	case errors.Is(err, raftnode.ErrDamaged):
		err = fmt.Errorf("%w; refusing to serve from it: restore the data dir from a backup, or start with -rebuild-from-peers to rebuild this server from the rest of the cluster (the damaged state is kept, renamed)", err)
	}
	if err != nil {
		return nil, err
	}
	node := s.raft
	cleanups = append(cleanups, func() { _ = node.Shutdown() })
	s.reads, s.stalls = s.newReadIndex()
	s.gate = newVersionGate(s.raft.Raft(), s.state)

	if s.workers, err = newWorkerPool(s); err != nil {
		return nil, err
	}
	workerConn := s.workers.conn
	cleanups = append(cleanups, func() { _ = workerConn.Close() })
	if err := s.openAuditLog(); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, s.closeAuditLog)
	schedulingRPC := newSchedulingService(s.sched, s.workers)
	s.rpc = rpc.NewServer(s, s, rpc.Config{
		Logger:                   s.logger.With("component", "rpc"),
		UpdateAllocBatchInterval: cfg.UpdateAllocBatchInterval,
		LeaderHoldTimeout:        cfg.LeaderHoldTimeout,
		Limits:                   cfg.Limits,
		Scheduling:               schedulingRPC,
		Collector:                s.gc,
		JobPlanner:               jobPlanner{s},
		Snapshots:                s,
		Credentials:              s.security.listen,
		PeerCredentials:          s.security.dial,
		RequireServerIdentity:    s.security.requireServer,
		Halted:                   s.HaltReason,
		ACLEnabled:               cfg.ACLEnabled,
		ACLBootstrapResetFile:    s.aclResetFile(),
		Audit:                    s.auditLog(),
	})
	s.autopilot = s.newAutopilot()
	s.leader.duties = s.leaderDuties()
	s.metrics = s.newRegistry(schedulingCollector{stats: schedulingRPC.Stats, rpc: s.rpc}, limitsCollector{s.rpc.LimitStats}, s.rpc.CallMetrics(), s.rpc.ReadMetrics())
	if s.http, err = s.startHTTP(); err != nil {
		return nil, err
	}
	s.start()
	s.startClustering()
	if err := s.writeInfoFile(); err != nil {
		_ = s.Shutdown(context.Background())
		return nil, err
	}
	s.logger.Info("drover server started", "rpc", s.rpcAddr, "raft", s.raft.Addr(), "data_dir", s.dataDir, "dev", cfg.Dev, "tls", cfg.TLS.Enabled())
	return s, nil
}

// start runs the gRPC server and the leadership monitor.
func (s *Server) start() {
	observations := make(chan raft.Observation, 16)
	s.raft.Raft().RegisterObserver(raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.stalls.Run(s.lifetime)
	}()
	go func() {
		defer s.wg.Done()
		if err := s.rpc.Serve(s.listener); err != nil {
			s.logger.Error("gRPC server stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.monitorLeadership(observations)
	}()
	s.wg.Go(s.watchHalt)
	s.workers.start(s.lifetime)
}

// Shutdown stops the server: health turns NOT_SERVING, blocking queries and
// streams return, calls in flight get until ctx ends (or ShutdownTimeout)
// to finish, then raft shuts down and releases the data dir. A dev server's
// data dir is removed. Shutdown is idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.logger.Info("shutting down")
		s.rpc.SetServing(false)
		s.handOffLeadership()
		close(s.shutdownCh)
		s.endLifetime()
		s.workers.stop()
		timeout := s.cfg.ShutdownTimeout
		if timeout <= 0 {
			timeout = DefaultConfig().ShutdownTimeout
		}
		stopCtx, cancel := context.WithTimeout(ctx, timeout)
		s.http.stop(stopCtx)
		s.rpc.Stop(stopCtx)
		cancel()
		var errs []error
		if err := s.raft.Shutdown(); err != nil {
			errs = append(errs, err)
		}
		s.events.Close()
		s.closeAuditLog()
		s.peers.close()
		s.wg.Wait()
		if s.cfg.Dev {
			if err := os.RemoveAll(s.dataDir); err != nil {
				errs = append(errs, fmt.Errorf("remove dev data dir %s: %w", s.dataDir, err))
			}
		}
		s.shutdownErr = errors.Join(errs...)
		s.logger.Info("shut down")
	})
	return s.shutdownErr
}

// ID is the server's raft id.
func (s *Server) ID() string { return s.id }

// RPCAddr is the advertised gRPC address.
func (s *Server) RPCAddr() string { return s.rpcAddr }

// RaftAddr is the advertised raft address.
func (s *Server) RaftAddr() string { return string(s.raft.Addr()) }

// advertised replaces the host of a bound address with the advertise host.
func advertised(bound, host string) string {
	if host == "" {
		return bound
	}
	_, port, _ := net.SplitHostPort(bound)
	return net.JoinHostPort(host, port)
}

// Info is what the info file holds.
type Info struct {
	ServerID string `json:"server_id"`
	RPCAddr  string `json:"rpc_addr"`
	RaftAddr string `json:"raft_addr"`
	DataDir  string `json:"data_dir"`
	PID      int    `json:"pid"`
	// HTTPAddr is the metrics endpoint, when served.
	HTTPAddr string `json:"http_addr,omitempty"`
}

func (s *Server) writeInfoFile() error {
	if s.cfg.InfoFile == "" {
		return nil
	}
	data, err := json.Marshal(Info{ServerID: s.id, RPCAddr: s.rpcAddr, RaftAddr: s.RaftAddr(), DataDir: s.dataDir, PID: os.Getpid(), HTTPAddr: s.HTTPAddr()})
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.cfg.InfoFile, data); err != nil {
		return fmt.Errorf("write info file: %w", err)
	}
	return nil
}

// writeFileAtomic writes data to a temporary file beside path and renames it
// into place, so readers never see a partial file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp." + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// BlockedQueries is the number of blocking queries waiting for a change.
func (s *Server) BlockedQueries() int64 { return s.rpc.BlockedQueries() }

// AllocWatchers is the number of agents in a blocking GetAllocs call.
func (s *Server) AllocWatchers() int64 { return s.rpc.AllocWatchers() }

// rpcListener is the caller's listener when it passed one, otherwise a new
// one on the configured address.
func rpcListener(cfg Config) (net.Listener, error) {
	if cfg.RPCListener != nil {
		return cfg.RPCListener, nil
	}
	l, err := net.Listen("tcp", cfg.RPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for gRPC on %s: %w", cfg.RPCAddr, err)
	}
	return l, nil
}
