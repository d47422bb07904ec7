package rpc

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/groupcommit"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Config tunes the gRPC server. Zero values mean the defaults in
// parentheses.
type Config struct {
	Logger *slog.Logger
	// UpdateAllocBatchInterval is how long agents' allocation reports are
	// collected into one raft entry (50ms).
	UpdateAllocBatchInterval time.Duration
	// MaxRecvMsgSize bounds a request (16 MiB).
	MaxRecvMsgSize int
	// Limits bound connections and calls in flight; zero numbers mean
	// DefaultLimits'.
	Limits Limits
	// LeaderHoldTimeout is how long a call that needs the leader waits for
	// one during an election before failing UNAVAILABLE (5s).
	LeaderHoldTimeout time.Duration
	// Scheduling serves the scheduler service and the worker operator
	// calls; nil answers them UNAVAILABLE.
	Scheduling Scheduling

	// Collector runs garbage collection for OperatorService.GarbageCollect;
	// nil answers it UNAVAILABLE.
	Collector Collector

	// JobPlanner answers JobService.Plan; nil answers it UNAVAILABLE.
	JobPlanner JobPlanner

	// Snapshots saves backups for OperatorService.SnapshotSave; nil
	// answers it UNAVAILABLE.
	Snapshots Snapshots

	// Credentials secure the listener (mutual TLS); nil serves plaintext,
	// for development and trusted networks only.
	Credentials credentials.TransportCredentials
	// PeerCredentials secure the connections this server opens to forward
	// calls to the leader; nil dials plaintext.
	PeerCredentials credentials.TransportCredentials
	// RequireServerIdentity, if set, is asked about every call of a
	// server-only method (the scheduler service, ClusterService.Join)
	// before the call is forwarded or answered; an error rejects the call
	// PERMISSION_DENIED. Nil lets every caller through.
	RequireServerIdentity func(ctx context.Context) error

	// ACLEnabled turns access control on: every operator call then needs
	// a token granting what accessRules say.
	ACLEnabled bool
	// ACLBootstrapResetFile is where an operator writes the reset index to
	// bootstrap ACLs again (read on the leader).
	ACLBootstrapResetFile string
	// Audit, if set, records every write call and every refused call; a
	// write is answered only once its line is written.
	Audit AuditLog

	// Halted, if set, says why this server stopped applying the raft log
	// (nil while it applies it). A halted server reports NOT_SERVING and
	// refuses the calls of the data services with FAILED_PRECONDITION
	// carrying the reason; the cluster and operator services still answer,
	// so that operators can see what happened.
	Halted func() error
}

const (
	defaultBatchInterval  = 50 * time.Millisecond
	defaultMaxRecvMsgSize = 16 << 20
	defaultMaxSendMsgSize = 64 << 20
	// streamWorkers is how many goroutines the gRPC server keeps for
	// calls: enough for the short calls in flight at once (agents'
	// reports and registrations wait a raft commit, a few ms). Agents'
	// GetAllocs polls wait up to a minute and hold a worker meanwhile;
	// calls that find every worker busy get a goroutine of their own.
	streamWorkers = 64
)

// serviceNames are the drover services whose health the server reports.
var serviceNames = []string{
	droverv1.NodeService_ServiceDesc.ServiceName,
	droverv1.JobService_ServiceDesc.ServiceName,
	droverv1.DeploymentService_ServiceDesc.ServiceName,
	droverv1.AllocService_ServiceDesc.ServiceName,
	droverv1.EvalService_ServiceDesc.ServiceName,
	droverv1.EventService_ServiceDesc.ServiceName,
	droverv1.OperatorService_ServiceDesc.ServiceName,
	droverv1.SchedulerService_ServiceDesc.ServiceName,
	droverv1.ACLService_ServiceDesc.ServiceName,
}

// Server is the gRPC server of one drover server: the drover services,
// grpc.health.v1 and server reflection on one listener.
type Server struct {
	grpc     *grpc.Server
	health   *health.Server
	services *services
	forward  *forwarder
	admit    *admission
	conns    *connLimit
	cancel   context.CancelFunc
	halted   func() error
	// inProcess is the listener of DialInProcess's connections.
	inProcess *inProcessListener
	// maxRecvMsgSize bounds a request.
	maxRecvMsgSize int
	// calls counts and times every call by method and code.
	calls *grpcprom.ServerMetrics

	// servingMu orders SetServing calls, so that one racing a halt cannot
	// report SERVING after the halt's NOT_SERVING.
	servingMu sync.Mutex
}

// services holds what every service implementation shares.
type services struct {
	backend   Backend
	cluster   Cluster
	sched     Scheduling
	collector Collector
	planner   JobPlanner
	snapshots Snapshots
	// peerConn is a pooled connection to another server (the leader),
	// for streams, which the forwarder does not carry.
	peerConn      func(addr string) (*grpc.ClientConn, error)
	logger        *slog.Logger
	reports       *groupcommit.Committer[*droverv1.NodeAllocUpdates]
	registrations *groupcommit.Committer[*droverv1.Node]
	statuses      *groupcommit.Committer[*droverv1.NodeStatusEntry]
	shutdown      context.Context
	// blocked counts blocking queries waiting for a change.
	blocked atomic.Int64
	// allocWatchers counts agents in a blocking GetAllocs call.
	allocWatchers atomic.Int64
}

// NewServer builds the gRPC server with every service registered. Health
// starts NOT_SERVING for the drover services until SetServing(true); the
// cluster service, which servers use to form a cluster, always serves.
func NewServer(b Backend, c Cluster, cfg Config) *Server {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	shutdown, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-b.ShutdownCh():
		case <-shutdown.Done():
		}
		cancel()
	}()
	svc := &services{backend: b, cluster: c, sched: cfg.Scheduling, collector: cfg.Collector, planner: cfg.JobPlanner,
		snapshots: cfg.Snapshots, logger: logger, shutdown: shutdown}
	fwd := newForwarder(c, b.LastContact, logger, orDefault(cfg.LeaderHoldTimeout, defaultHoldTimeout), cfg.PeerCredentials, shutdown.Done())
	svc.peerConn = fwd.conn
	fwd.followers = newFollowerReads(fwd, func(ctx context.Context, index uint64) error {
		_, err := b.State().SnapshotMinIndex(ctx, index)
		return err
	})
	svc.newCommitters(orDefault(cfg.UpdateAllocBatchInterval, defaultBatchInterval))
	recover := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		logger.Error("panic in RPC handler", "panic", p)
		return status.Errorf(codes.Internal, "internal error: %v", p)
	})
	auth := authorizer{require: cfg.RequireServerIdentity}
	enforce := &enforcer{resolver: newResolver(cfg.ACLEnabled, b.State, nil), state: b.State, serverPeer: cfg.RequireServerIdentity}
	audit := auditor{log: cfg.Audit}
	guard := haltGuard{halted: cfg.Halted}
	portable := &portableGate{}
	limits := cfg.Limits.withDefaults()
	admit := newAdmission(limits, logger)
	maxRecv := orDefault(cfg.MaxRecvMsgSize, defaultMaxRecvMsgSize)
	calls := newCallMetrics()
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(Codec{}),
		grpc.MaxRecvMsgSize(maxRecv),
		grpc.MaxSendMsgSize(defaultMaxSendMsgSize),
		grpc.MaxConcurrentStreams(uint32(limits.MaxStreamsPerConn)),
		// Calls run on long-lived goroutines whose stacks have already
		// grown, instead of a new goroutine per call growing its stack
		// again (runtime.newstack was 6% of the leader's CPU under
		// Node.Register). A call finding every worker busy gets a new
		// goroutine, as without workers, so this bounds nothing.
		grpc.NumStreamWorkers(streamWorkers),
		// Agents hold connections for hours: probe idle ones so a vanished
		// agent's connection is closed, and allow agents' own pings.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: limits.KeepaliveMinTime, PermitWithoutStream: limits.KeepalivePermitWithoutStream}),
		// Admission ends a call's hold when its answer is sent.
		grpc.StatsHandler(admit),
		// Admission comes first, so that a refusal costs nothing and a
		// follower bounds what it forwards. Requests that are not portable
		// are refused before anything reads them. The identity check comes
		// before the forwarder: a follower must not pass on a call the
		// caller may not make, as the leader would see the follower's
		// server certificate, not the caller's.
		// The ACL enforcer, like the identity check, runs on the server
		// the caller called, from its own state; the leader checks a
		// forwarded call's token again. The auditor sees the outcome.
		// Call metrics come right after recovery so that they count every
		// refusal with its code.
		grpc.ChainUnaryInterceptor(recovery.UnaryServerInterceptor(recover), calls.UnaryServerInterceptor(), admit.unary, svc.unaryErrors, portable.unary, guard.unary, auth.unary, audit.unary, enforce.unary, fwd.unary),
		grpc.ChainStreamInterceptor(recovery.StreamServerInterceptor(recover), calls.StreamServerInterceptor(), svc.streamErrors, portable.stream, guard.stream, auth.stream, audit.stream, enforce.stream),
	}
	if cfg.Credentials != nil {
		// In-process connections (the HTTP API) skip TLS and carry no
		// certificate.
		opts = append(opts, grpc.Creds(inProcessCreds{TransportCredentials: cfg.Credentials}))
	}
	gs := grpc.NewServer(opts...)
	droverv1.RegisterNodeServiceServer(gs, &nodeService{services: svc})
	droverv1.RegisterJobServiceServer(gs, &jobService{services: svc})
	droverv1.RegisterDeploymentServiceServer(gs, &deploymentService{services: svc})
	droverv1.RegisterAllocServiceServer(gs, &allocService{services: svc})
	droverv1.RegisterEvalServiceServer(gs, &evalService{services: svc})
	droverv1.RegisterEventServiceServer(gs, &eventService{services: svc})
	droverv1.RegisterClusterServiceServer(gs, &clusterService{services: svc})
	droverv1.RegisterOperatorServiceServer(gs, &operatorService{services: svc})
	droverv1.RegisterSchedulerServiceServer(gs, &schedulerService{services: svc})
	droverv1.RegisterACLServiceServer(gs, &aclService{services: svc, enabled: cfg.ACLEnabled, resetFile: cfg.ACLBootstrapResetFile})

	hs := health.NewServer()
	for _, name := range serviceNames {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	calls.InitializeMetrics(gs)
	return &Server{grpc: gs, health: hs, services: svc, forward: fwd, admit: admit, calls: calls,
		conns: newConnLimit(limits.MaxConnsPerIP, logger), cancel: cancel, halted: cfg.Halted,
		inProcess: newInProcessListener(), maxRecvMsgSize: maxRecv}
}

// Serve accepts connections on l, within the limit per address, and those
// of DialInProcess, until Stop.
func (s *Server) Serve(l net.Listener) error {
	go func() { _ = s.grpc.Serve(s.inProcess) }()
	return s.grpc.Serve(s.conns.listener(l))
}

// SetServing reports the drover services as serving or not in
// grpc.health.v1; the server calls it as it gains and loses a known leader
// with caught-up state.
// A halted server never reports SERVING.
func (s *Server) SetServing(serving bool) {
	s.servingMu.Lock()
	defer s.servingMu.Unlock()
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving && (s.halted == nil || s.halted() == nil) {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range serviceNames {
		s.health.SetServingStatus(name, st)
	}
}

// BlockedQueries is the number of blocking queries (GetAllocs long polls
// included) currently waiting for a change.
func (s *Server) BlockedQueries() int64 { return s.services.blocked.Load() }

// AllocWatchers counts the agents in a blocking GetAllocs call now.
func (s *Server) AllocWatchers() int64 { return s.services.allocWatchers.Load() }

// Stop reports NOT_SERVING for everything, ends blocking queries and
// streams, and waits for calls in flight until ctx ends; then it closes
// every connection.
func (s *Server) Stop(ctx context.Context) {
	s.health.Shutdown()
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	s.forward.close()
}

func (s *services) unaryErrors(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, toStatus(err, s.logger)
}

func (s *services) streamErrors(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return toStatus(handler(srv, ss), s.logger)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
