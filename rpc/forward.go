package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// leaderMethods are answered only by the leader: every write, and the
// operator reads that need the leader's view of the cluster. Reads that
// carry QueryOptions go to the leader unless they allow stale answers;
// everything else is answered by the server called.
var leaderMethods = map[string]bool{
	droverv1.NodeService_Register_FullMethodName:                   true,
	droverv1.NodeService_UpdateStatus_FullMethodName:               true,
	droverv1.NodeService_UpdateAlloc_FullMethodName:                true,
	droverv1.NodeService_UpdateEligibility_FullMethodName:          true,
	droverv1.NodeService_UpdateDrain_FullMethodName:                true,
	droverv1.OperatorService_GarbageCollect_FullMethodName:         true,
	droverv1.JobService_Register_FullMethodName:                    true,
	droverv1.JobService_Deregister_FullMethodName:                  true,
	droverv1.JobService_Revert_FullMethodName:                      true,
	droverv1.JobService_Plan_FullMethodName:                        true,
	droverv1.DeploymentService_Promote_FullMethodName:              true,
	droverv1.DeploymentService_Pause_FullMethodName:                true,
	droverv1.DeploymentService_Fail_FullMethodName:                 true,
	droverv1.ClusterService_Join_FullMethodName:                    true,
	droverv1.ClusterService_ReadIndex_FullMethodName:               true,
	droverv1.ClusterService_ForwardAllocReports_FullMethodName:     true,
	droverv1.OperatorService_RaftListPeers_FullMethodName:          true,
	droverv1.OperatorService_RaftRemovePeer_FullMethodName:         true,
	droverv1.OperatorService_RaftTransferLeadership_FullMethodName: true,
	droverv1.OperatorService_ServerMembers_FullMethodName:          true,
	droverv1.OperatorService_SchedulerStats_FullMethodName:         true,
	droverv1.SchedulerService_Dequeue_FullMethodName:               true,
	droverv1.SchedulerService_Ack_FullMethodName:                   true,
	droverv1.SchedulerService_Nack_FullMethodName:                  true,
	droverv1.SchedulerService_SubmitPlan_FullMethodName:            true,
	droverv1.SchedulerService_UpdateEval_FullMethodName:            true,
	droverv1.SchedulerService_CreateEval_FullMethodName:            true,
	droverv1.SchedulerService_ReblockEval_FullMethodName:           true,
	droverv1.ACLService_Bootstrap_FullMethodName:                   true,
	droverv1.ACLService_ApplyPolicy_FullMethodName:                 true,
	droverv1.ACLService_DeletePolicy_FullMethodName:                true,
	droverv1.ACLService_CreateToken_FullMethodName:                 true,
	droverv1.ACLService_UpdateToken_FullMethodName:                 true,
	droverv1.ACLService_DeleteToken_FullMethodName:                 true,
}

// queryRequest is a read whose caller chooses between a stale local answer
// and the leader's.
type queryRequest interface {
	GetQuery() *droverv1.QueryOptions
}

const (
	// hopsKey is the metadata key counting how often a call was forwarded.
	// Two servers that briefly disagree on the leader can pass a call on
	// once more, but never around in a circle.
	hopsKey = "drover-forward-hops"
	maxHops = 2
	// deadlineKey carries a forwarded call's deadline, in unix nanoseconds.
	deadlineKey = "drover-forward-deadline"

	defaultHoldTimeout = 5 * time.Second
	minLeaderPoll      = 10 * time.Millisecond
	maxLeaderPoll      = 500 * time.Millisecond
)

// forwarder routes calls that need the leader: it answers them here when
// this server is the ready leader, passes them to the leader over a pooled
// connection otherwise, and during an election waits up to the hold
// timeout for a leader before failing UNAVAILABLE.
type forwarder struct {
	cluster Cluster
	logger  *slog.Logger
	hold    time.Duration
	// creds secure the connections to the leader.
	creds credentials.TransportCredentials
	// stopping is closed when the server shuts down: a call waiting for a
	// leader gives up at once rather than hold the shutdown up.
	stopping <-chan struct{}
	// lastContact is how stale this server's state may be (Backend).
	lastContact func() time.Duration
	// followers answers consistent reads on this server when it follows;
	// nil forwards them to the leader.
	followers *followerReads
	// reads counts consistent reads by where they were answered.
	reads *consistentReads

	// reports carries agents' allocation reports to the leader in
	// batches.
	reports *reportBatcher

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// newForwarder makes a forwarder that dials the leader with creds, or
// plaintext when creds is nil, until stopping is closed.
func newForwarder(c Cluster, lastContact func() time.Duration, logger *slog.Logger, hold time.Duration,
	creds credentials.TransportCredentials, stopping <-chan struct{}) *forwarder {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	f := &forwarder{cluster: c, lastContact: lastContact, logger: logger, hold: hold, creds: creds, stopping: stopping,
		reads: newConsistentReads(), conns: make(map[string]*grpc.ClientConn)}
	f.reports = newReportBatcher(f)
	return f
}

// route decides where a call is answered. leader: only by the leader.
// confirm: the call is a consistent read, which the leader answers only
// after confirming that it still leads (Cluster.ConfirmLeadership). A stale
// read asks this server for an answer no older than max_stale; a server out
// of touch with the leader for longer turns it into a consistent read.
func (f *forwarder) route(method string, req any) (leader, confirm bool) {
	if leaderMethods[method] {
		return true, false
	}
	q, ok := req.(queryRequest)
	if !ok {
		return false, false
	}
	opts := q.GetQuery()
	if opts.GetAllowStale() && opts.EffectiveMaxStale() > 0 && tooStale(f.lastContact(), opts.EffectiveMaxStale()) {
		opts.AllowStale = false
	}
	if opts.GetAllowStale() {
		return false, false
	}
	return true, true
}

// tooStale reports whether a server whose last contact with the leader was
// lastContact ago (negative: never) may not answer a read that accepts
// maxStale.
func tooStale(lastContact, maxStale time.Duration) bool {
	return lastContact < 0 || lastContact > maxStale
}

// unary is the interceptor.
func (f *forwarder) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, cancel, err := forwardedDeadline(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	needsLeader, confirm := f.route(info.FullMethod, req)
	if !needsLeader {
		return handler(ctx, req)
	}
	assignRequestID(req)
	hops := incomingHops(ctx)
	holdUntil := time.Now().Add(f.hold)
	poll := minLeaderPoll
	var lastErr error
	for {
		// Take the change channel first, so a change between reading the
		// leader and waiting is not missed.
		changed := f.cluster.LeaderChanged()
		leader := f.cluster.Leader()
		switch {
		case leader.Ready:
			if !confirm {
				return handler(ctx, req)
			}
			err := f.cluster.ConfirmLeadership(ctx)
			if err == nil {
				f.reads.count(answeredByLeader)
				return handler(ctx, req)
			}
			if !errors.Is(err, ErrUnavailable) {
				return nil, err
			}
			// Deposed, or not yet established in a new term: the read
			// belongs to whoever leads now.
			lastErr = err
		case !leader.Local && leader.RPCAddr != "" && hops < maxHops:
			if confirm && hops == 0 {
				if resp, answered, err := f.followers.answer(ctx, req, handler); answered {
					return resp, err
				}
			}
			resp, err := f.forwardCall(ctx, changed, leader, info.FullMethod, req, hops+1)
			if errors.Is(err, errLeaderChanged) {
				// Abandoned: the call follows the new leader, with a
				// new hold to find it.
				lastErr = fmt.Errorf("leader %s at %s: %w", leader.ID, leader.RPCAddr, err)
				holdUntil = time.Now().Add(f.hold)
				continue
			}
			if status.Code(err) != codes.Unavailable {
				if confirm && err == nil {
					f.reads.count(answeredByForward)
				}
				return resp, err
			}
			// The leader went away or lost leadership before answering.
			// Retrying is safe: node writes are idempotent and job writes
			// carry a request id.
			lastErr = fmt.Errorf("leader %s at %s: %w", leader.ID, leader.RPCAddr, err)
		}
		if err := f.refuseWhileFull(confirm, lastErr); err != nil {
			return nil, err
		}
		if err := waitLeader(ctx, f.stopping, changed, holdUntil, poll); err != nil {
			if errors.Is(err, errStopping) {
				return nil, unavailable("server shutting down")
			}
			return nil, noLeader(f.hold, lastErr)
		}
		poll = min(2*poll, maxLeaderPoll)
	}
}

// refuseWhileFull ends the hold of a write at once when no leader took it
// and this server's own data dir is full. With every data dir full each
// newly elected leader fails to store its first entry and steps down, so
// leadership changes every few seconds and a held write would follow it
// until the caller's deadline, never learning why. A full follower of a
// leader with space refuses too, but only when an attempt failed or no
// leader is known: the caller's retry goes to a server that can help.
// Reads (confirm) are held as before: they need no disk.
func (f *forwarder) refuseWhileFull(confirm bool, lastErr error) error {
	if confirm {
		return nil
	}
	info := f.cluster.Info()
	if info.GetStorageError() == "" {
		return nil
	}
	msg := fmt.Sprintf("server %s did not store the write: %s", info.GetServer().GetId(), info.GetStorageError())
	if lastErr != nil {
		msg += "; last attempt: " + lastErr.Error()
	}
	return unavailable(msg)
}

// waitLeader waits for the leader to change, for a poll interval (the
// leader's address may arrive without a leader change), or until the hold
// ends. It fails only when the hold or the call ends, or the server stops
// (errStopping).
func waitLeader(ctx context.Context, stopping, changed <-chan struct{}, holdUntil time.Time, poll time.Duration) error {
	left := time.Until(holdUntil)
	if left <= 0 {
		return context.DeadlineExceeded
	}
	timer := time.NewTimer(min(poll, left))
	defer timer.Stop()
	select {
	case <-changed:
		return nil
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stopping:
		return errStopping
	}
}

// errStopping ends a wait for a leader when the server shuts down.
var errStopping = errors.New("server shutting down")

// noLeader is the answer when no leader took the call within the hold.
func noLeader(hold time.Duration, lastErr error) error {
	msg := fmt.Sprintf("no cluster leader answered within %s", hold)
	if lastErr != nil {
		msg += ": last attempt: " + lastErr.Error()
	}
	return unavailable(msg)
}

// errLeaderChanged ends a forwarded call whose leader was replaced while it
// was in flight.
var errLeaderChanged = errors.New("the leader changed while the call was forwarded to it")

// forwardWhileLeader forwards the call to leader, abandoning it with
// errLeaderChanged if another server becomes leader meanwhile: a leader cut
// off by the network may hold the call until the caller's deadline, while
// the new leader could answer it now. changed is the leader-changed channel
// taken before leader was read. An abandoned write may still be applied by
// the old leader; sending it again is safe for the same reason as retrying
// after UNAVAILABLE (see unary).
func (f *forwarder) forwardWhileLeader(ctx context.Context, changed <-chan struct{}, leader Leader, method string, req any, hops int) (any, error) {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		for {
			select {
			case <-fctx.Done():
				return
			case <-changed:
			}
			changed = f.cluster.LeaderChanged()
			if now := f.cluster.Leader(); now.ID != leader.ID || now.RPCAddr != leader.RPCAddr {
				cancel(errLeaderChanged)
				return
			}
		}
	}()
	resp, err := f.forward(fctx, leader.RPCAddr, method, req, hops)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(fctx), errLeaderChanged) {
		return nil, errLeaderChanged
	}
	return resp, err
}

// forward calls method on the leader and returns the leader's answer.
func (f *forwarder) forward(ctx context.Context, addr, method string, req any, hops int) (any, error) {
	resp, err := newResponse(method)
	if err != nil {
		return nil, err
	}
	conn, err := f.conn(addr)
	if err != nil {
		return nil, unavailable(err.Error())
	}
	ctx = metadata.AppendToOutgoingContext(ctx, hopsKey, strconv.Itoa(hops))
	// The leader checks the caller's token again: forwarding must not
	// turn a call into the forwarding server's.
	if secret := tokenSecret(ctx); secret != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, TokenMetadataKey, secret)
	}
	if identityFrom(ctx) == serverIdentity {
		ctx = metadata.AppendToOutgoingContext(ctx, asServerKey, "1")
	}
	if d, ok := ctx.Deadline(); ok {
		ctx = metadata.AppendToOutgoingContext(ctx, deadlineKey, strconv.FormatInt(d.UnixNano(), 10))
	}
	if err := conn.Invoke(ctx, method, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// detached returns a context for work this server does for several
// callers at once: it ends at deadline or when the server shuts down, not
// with any one caller.
func (f *forwarder) detached(deadline time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	go func() {
		select {
		case <-f.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// conn returns the pooled connection to addr, dialing it on first use.
func (f *forwarder) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, fmt.Errorf("forward to %s: server is shutting down", addr)
	}
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(f.creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec{}), grpc.MaxCallRecvMsgSize(defaultMaxSendMsgSize)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("dial leader at %s: %w", addr, err)
	}
	f.conns[addr] = c
	return c, nil
}

// close closes every pooled connection; later forwards fail.
func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for addr, c := range f.conns {
		_ = c.Close()
		delete(f.conns, addr)
	}
}

// newResponse makes an empty response message of method, found through
// the method's descriptor so that one forwarder serves every service.
func newResponse(method string) (any, error) {
	name := protoreflect.FullName(strings.Replace(strings.TrimPrefix(method, "/"), "/", ".", 1))
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return nil, fmt.Errorf("forward %s: %w", method, err)
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return nil, fmt.Errorf("forward %s: not a method", method)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, fmt.Errorf("forward %s: %w", method, err)
	}
	return mt.New().Interface(), nil
}

// forwardedDeadline applies the caller's deadline that a forwarding server
// passed on, as an absolute time: gRPC's own deadline is relative and starts
// again when a call arrives, so a forwarded call held up in the network (a
// partition that heals, retransmitted bytes) would otherwise run long after
// its caller gave up, and a write could land after the caller's retry and
// its later writes. A call that arrives too late is refused without
// running. Servers' clocks must agree to well within a caller's deadline; a
// leader whose clock runs ahead refuses more, never less.
func forwardedDeadline(ctx context.Context) (context.Context, context.CancelFunc, error) {
	vals := metadata.ValueFromIncomingContext(ctx, deadlineKey)
	if len(vals) == 0 {
		return ctx, func() {}, nil
	}
	ns, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil {
		return ctx, func() {}, nil
	}
	return withCallerDeadline(ctx, ns)
}

// withCallerDeadline bounds ctx by a forwarded caller's deadline, in unix
// nanoseconds, or refuses the call if that deadline has passed.
func withCallerDeadline(ctx context.Context, ns int64) (context.Context, context.CancelFunc, error) {
	deadline := time.Unix(0, ns)
	if late := time.Since(deadline); late > 0 {
		return ctx, func() {}, status.Errorf(codes.DeadlineExceeded, "forwarded call arrived %s after its caller's deadline; not run", late)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	return ctx, cancel, nil
}

// incomingHops is how often the call was forwarded before reaching here.
func incomingHops(ctx context.Context) int {
	vals := metadata.ValueFromIncomingContext(ctx, hopsKey)
	if len(vals) == 0 {
		return 0
	}
	n, err := strconv.Atoi(vals[0])
	if err != nil || n < 0 {
		return maxHops
	}
	return n
}

// assignRequestID gives a job write without an idempotency key one before
// it is first forwarded, so that the forwarder's own retries apply it at
// most once. Clients that retry themselves must send their own key.
func assignRequestID(req any) {
	switch r := req.(type) {
	case *droverv1.RegisterJobRequest:
		if r.RequestId == "" {
			r.RequestId = uuid.NewString()
		}
	case *droverv1.DeregisterJobRequest:
		if r.RequestId == "" {
			r.RequestId = uuid.NewString()
		}
	}
}
