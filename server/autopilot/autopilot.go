// Package autopilot is the leader's server-health tracking, stabilization
// (promotion of servers that joined as non-voters) and dead-server cleanup,
// built on hashicorp/raft-autopilot. It runs only on the leader: Start on
// gaining leadership, Stop on losing it.
//
// Membership comes from the raft configuration; the replicated server
// records only add each server's gRPC address and announced version. Health
// comes from asking every other server to describe itself (FetchInfo). A
// server that cannot be reached for DeadServerAfter is removed from raft and
// then its record is dropped.
package autopilot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftautopilot "github.com/hashicorp/raft-autopilot"

	"github.com/droverhq/drover/internal/version"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server/raftnode"
)

// Defaults for the zero values of Config. They are Nomad's autopilot
// defaults, except DeadServerAfter, which Nomad takes from serf's failure
// detection and drover has to decide itself.
const (
	DefaultDeadServerAfter         = 5 * time.Minute
	DefaultLastContactThreshold    = 200 * time.Millisecond
	DefaultMaxTrailingLogs         = 250
	DefaultServerStabilizationTime = 10 * time.Second
)

const (
	// stopWait bounds how long Stop waits for the background goroutines.
	// They all watch the run's context, but a raft configuration change
	// in flight only returns once raft commits or gives up leadership, and
	// a new leader must not hang on its predecessor's bookkeeping.
	stopWait = 5 * time.Second
	// removeEnqueueTimeout bounds how long RemoveServer waits to hand the
	// change to raft's leader loop; the commit itself is awaited without it.
	removeEnqueueTimeout = 10 * time.Second
	// recordAttempts and recordTimeout shape the retries of RemoveRecord:
	// once a server is out of raft nothing else would ever drop its record.
	recordAttempts = 3
	recordTimeout  = 10 * time.Second
	recordBackoff  = time.Second
)

// errNoRPCAddr is the probe error for a server of the raft configuration that
// has no record with a gRPC address yet (e.g. in the moment between a join's
// raft change and its record write).
var errNoRPCAddr = errors.New("no RPC address recorded for this server")

// Config wires the autopilot to the server. Raft, LocalID, Members and
// FetchInfo are required.
type Config struct {
	// Raft is the local raft node; *raft.Raft satisfies the interface.
	Raft raftautopilot.Raft
	// LocalID is this server's raft id. It is never probed over RPC and
	// never removed.
	LocalID string
	// LocalVersion is the release this server runs as; empty means the
	// binary's own.
	LocalVersion string
	// Logger receives the autopilot's logs and the library's (through an
	// hclog adapter); nil means slog.Default().
	Logger *slog.Logger
	// Members lists the servers recorded in the replicated state (id, RPC
	// address, raft address, announced version). It is called from the
	// autopilot's goroutines and must not block on the autopilot.
	Members func() []*droverv1.ServerMember
	// FetchInfo asks one server, by gRPC address, to describe itself. The
	// context carries the deadline (half the update interval) and is
	// cancelled by Stop. ServerInfoResponse.last_contact should be negative
	// when the server never heard from a leader.
	FetchInfo func(ctx context.Context, rpcAddr string) (*droverv1.ServerInfoResponse, error)
	// RemoveRecord forgets a server in the replicated state after the
	// autopilot removed it from raft. May be nil.
	RemoveRecord func(ctx context.Context, id string) error

	// CleanupDeadServers lets the autopilot remove failed servers. The zero
	// value is false: the server config is where it defaults to true.
	CleanupDeadServers bool
	// DeadServerAfter is how long FetchInfo must fail without a single
	// success before a server counts as failed (DefaultDeadServerAfter).
	DeadServerAfter time.Duration
	// MinQuorum is the number of voters cleanup never goes below; 0 leaves
	// only the library's own rule of removing fewer than half the voters at
	// a time.
	MinQuorum uint
	// LastContactThreshold is how long a server may go without hearing from
	// the leader and still be healthy (DefaultLastContactThreshold).
	LastContactThreshold time.Duration
	// MaxTrailingLogs is how many entries a server may trail the leader by
	// and still be healthy (DefaultMaxTrailingLogs).
	MaxTrailingLogs uint64
	// ServerStabilizationTime is how long a non-voter must stay healthy
	// before it is promoted (DefaultServerStabilizationTime).
	ServerStabilizationTime time.Duration
	// UpdateInterval is how often health is measured, ReconcileInterval
	// how often promotions and cleanup run; zero means the library's
	// defaults (2s and 10s).
	UpdateInterval, ReconcileInterval time.Duration
}

// Autopilot tracks server health and promotes and removes servers while this
// server is the leader. It is safe for concurrent use.
type Autopilot struct {
	cfg     Config
	localID raft.ServerID
	log     *slog.Logger
	lib     *raftautopilot.Autopilot
	libConf *raftautopilot.Config // never modified after New: the library reads it concurrently

	// lifeMu serializes Start and Stop so a leadership flap cannot
	// interleave them.
	lifeMu sync.Mutex

	mu         sync.Mutex
	cur        *run // nil while stopped
	probes     map[raft.ServerID]*probe
	lastConfig []raft.Server // last raft configuration read successfully
	prevHealth map[raft.ServerID]bool
	prevFT     int
}

// run is one leadership term's execution. Results of a probe or removal
// started under one run are dropped once another run (or none) is current,
// so a slow goroutine from a lost term cannot pollute the next.
type run struct {
	ctx      context.Context
	cancel   context.CancelFunc
	removals sync.WaitGroup
	removing map[raft.ServerID]bool // guarded by Autopilot.mu
}

// New builds a stopped autopilot; zero durations and limits in cfg take the
// defaults above.
func New(cfg Config) *Autopilot {
	if cfg.DeadServerAfter <= 0 {
		cfg.DeadServerAfter = DefaultDeadServerAfter
	}
	if cfg.LastContactThreshold <= 0 {
		cfg.LastContactThreshold = DefaultLastContactThreshold
	}
	if cfg.MaxTrailingLogs == 0 {
		cfg.MaxTrailingLogs = DefaultMaxTrailingLogs
	}
	if cfg.ServerStabilizationTime <= 0 {
		cfg.ServerStabilizationTime = DefaultServerStabilizationTime
	}
	base := cfg.Logger
	if base == nil {
		base = slog.Default()
	}
	a := &Autopilot{
		cfg:     cfg,
		localID: raft.ServerID(cfg.LocalID),
		log:     base.With(slog.String("component", "autopilot")),
		libConf: &raftautopilot.Config{
			CleanupDeadServers:      cfg.CleanupDeadServers,
			LastContactThreshold:    cfg.LastContactThreshold,
			MaxTrailingLogs:         cfg.MaxTrailingLogs,
			MinQuorum:               cfg.MinQuorum,
			ServerStabilizationTime: cfg.ServerStabilizationTime,
		},
		probes: map[raft.ServerID]*probe{},
	}
	a.lib = raftautopilot.New(cfg.Raft, (*delegate)(a),
		// The library names its logger "autopilot" itself.
		raftautopilot.WithLogger(raftnode.NewHCLogger(base, "")),
		raftautopilot.WithUpdateInterval(cfg.UpdateInterval),
		raftautopilot.WithReconcileInterval(cfg.ReconcileInterval),
	)
	return a
}

// Start begins tracking, promoting and cleaning up; call it on gaining
// leadership. It measures once before returning (the library does, bounded
// by about a second) so Members is meaningful right away. Starting a running
// autopilot does nothing. Cancelling ctx stops the background work as Stop
// does; a later Start starts it again.
func (a *Autopilot) Start(ctx context.Context) {
	a.lifeMu.Lock()
	defer a.lifeMu.Unlock()
	if ctx.Err() != nil {
		// Leadership already ended: a Start that lost the race with Stop
		// must not start anything.
		return
	}
	a.mu.Lock()
	cur := a.cur
	a.mu.Unlock()
	if cur != nil {
		if cur.ctx.Err() == nil {
			return
		}
		a.stopLocked()
	}

	rctx, cancel := context.WithCancel(ctx)
	r := &run{ctx: rctx, cancel: cancel, removing: map[raft.ServerID]bool{}}
	a.mu.Lock()
	a.cur = r
	// Observations from an earlier term are stale: whatever happened
	// while another server led was not seen here, so failure clocks and
	// health start afresh.
	a.probes = map[raft.ServerID]*probe{}
	a.prevHealth = map[raft.ServerID]bool{}
	a.prevFT = 0
	a.mu.Unlock()

	a.lib.Start(rctx)
	a.log.Info("autopilot started",
		"cleanup_dead_servers", a.cfg.CleanupDeadServers,
		"dead_server_after", a.cfg.DeadServerAfter,
		"stabilization_time", a.cfg.ServerStabilizationTime)
}

// Stop ends tracking, promotions and cleanup; call it on losing leadership.
// It cancels everything in flight and waits for the goroutines, but no
// longer than a few seconds. It is safe to call when not started and more
// than once; Start may follow.
func (a *Autopilot) Stop() {
	a.lifeMu.Lock()
	defer a.lifeMu.Unlock()
	a.stopLocked()
}

// stopLocked is Stop with lifeMu held.
func (a *Autopilot) stopLocked() {
	a.mu.Lock()
	r := a.cur
	a.cur = nil
	a.probes = map[raft.ServerID]*probe{}
	a.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	libDone := a.lib.Stop()
	// No new removal can be added to r once a.cur is no longer r, so
	// waiting on it cannot race with Add.
	done := make(chan struct{})
	go func() {
		<-libDone
		r.removals.Wait()
		close(done)
	}()
	timer := time.NewTimer(stopWait)
	defer timer.Stop()
	select {
	case <-done:
		a.log.Info("autopilot stopped")
	case <-timer.C:
		// The library makes the next run wait for this one, and every
		// result of this run is discarded, so carrying on is safe.
		a.log.Warn("autopilot still finishing in the background", "waited", stopWait)
	}
}

// Members returns the current view of every server in the raft
// configuration: addresses, version (from its last answer, else as
// announced), raft state, voting rights, health and the error of the last
// probe, plus whether the cluster is healthy and how many voters may fail.
// Health is only known while running; elsewhere every server shows unhealthy.
func (a *Autopilot) Members() *droverv1.ServerMembersResponse {
	config := a.raftConfig()
	records := a.records()
	a.mu.Lock()
	running := a.cur != nil
	a.mu.Unlock()
	state := a.lib.GetState()
	if state == nil || !running {
		// The library clears its state on stopping only if its goroutine
		// got going first: a Stop right after Start leaves the state of
		// Start's first measurement in place. Not running means no view.
		state = &raftautopilot.State{}
	}
	var leaderID raft.ServerID
	leaderAddr := a.cfg.Raft.Leader()
	for _, s := range config {
		if leaderAddr != "" && s.Address == leaderAddr {
			leaderID = s.ID
		}
	}

	a.mu.Lock()
	probes := make(map[raft.ServerID]*probe, len(a.probes))
	for id, p := range a.probes {
		cp := *p
		probes[id] = &cp
	}
	a.mu.Unlock()

	return buildMembers(memberInputs{
		config:         config,
		state:          state,
		records:        records,
		probes:         probes,
		localID:        a.localID,
		localVersion:   a.localVersion(),
		localRaftState: RaftState(a.cfg.Raft.State()),
		leaderID:       leaderID,
		conf:           a.libConf,
	})
}

// LastIndexes returns the last raft index of each server (by id) as last
// measured in this leadership term. Servers that never answered are absent.
func (a *Autopilot) LastIndexes() map[string]uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]uint64, len(a.probes))
	for id, p := range a.probes {
		if p.measured {
			out[string(id)] = p.stats.LastIndex
		}
	}
	return out
}

// raftConfig reads the raft configuration, falling back to the last one read
// successfully: KnownServers must never come back short (see knownServers).
func (a *Autopilot) raftConfig() []raft.Server {
	f := a.cfg.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.lastConfig
	}
	servers := f.Configuration().Servers
	a.mu.Lock()
	a.lastConfig = servers
	a.mu.Unlock()
	return servers
}

// records indexes the replicated server records by id.
func (a *Autopilot) records() map[string]*droverv1.ServerMember {
	out := map[string]*droverv1.ServerMember{}
	if a.cfg.Members == nil {
		return out
	}
	for _, m := range a.cfg.Members() {
		if m.GetId() != "" {
			out[m.GetId()] = m
		}
	}
	return out
}

// delegate is the library's ApplicationIntegration. It is a distinct type so
// the library's callbacks are not part of Autopilot's exported API.
type delegate Autopilot

var _ raftautopilot.ApplicationIntegration = (*delegate)(nil)

// AutopilotConfig returns the fixed library configuration.
func (d *delegate) AutopilotConfig() *raftautopilot.Config { return d.libConf }

// NotifyState logs health changes. The library calls it with its state lock
// held, so it must not call back into GetState (or Members).
func (d *delegate) NotifyState(s *raftautopilot.State) {
	a := (*Autopilot)(d)
	type change struct {
		id      raft.ServerID
		healthy bool
	}
	var changes []change
	a.mu.Lock()
	if a.cur == nil {
		a.mu.Unlock()
		return
	}
	for id, ss := range s.Servers {
		prev, seen := a.prevHealth[id]
		if seen && prev != ss.Health.Healthy {
			changes = append(changes, change{id, ss.Health.Healthy})
		}
		a.prevHealth[id] = ss.Health.Healthy
	}
	for id := range a.prevHealth {
		if _, ok := s.Servers[id]; !ok {
			delete(a.prevHealth, id)
		}
	}
	ftChanged := a.prevFT != s.FailureTolerance
	prevFT := a.prevFT
	a.prevFT = s.FailureTolerance
	a.mu.Unlock()

	for _, c := range changes {
		if c.healthy {
			a.log.Info("server is healthy again", "id", c.id)
		} else {
			a.log.Warn("server became unhealthy", "id", c.id)
		}
	}
	if ftChanged {
		a.log.Info("cluster failure tolerance changed", "from", prevFT, "to", s.FailureTolerance,
			"healthy", s.Healthy, "voters", len(s.Voters))
	}
}

// KnownServers lists every server of the raft configuration with the status
// the probes give it.
func (d *delegate) KnownServers() map[raft.ServerID]*raftautopilot.Server {
	a := (*Autopilot)(d)
	config := a.raftConfig()
	records := a.records()
	if len(config) == 0 {
		// No configuration could be read, ever. Answer with the records
		// rather than nothing, which would make every raft server stale.
		for _, m := range records {
			config = append(config, raft.Server{ID: raft.ServerID(m.GetId()), Address: raft.ServerAddress(m.GetRaftAddr())})
		}
	}
	isLeader := a.cfg.Raft.State() == raft.Leader

	a.mu.Lock()
	defer a.mu.Unlock()
	inConfig := make(map[raft.ServerID]bool, len(config))
	for _, s := range config {
		inConfig[s.ID] = true
	}
	for id := range a.probes {
		if !inConfig[id] {
			// Gone from raft (removed by us or an operator): forget it
			// so a later rejoin under the same id starts clean.
			delete(a.probes, id)
		}
	}
	return knownServers(knownInputs{
		now:       time.Now(),
		config:    config,
		records:   records,
		probes:    a.probes,
		localID:   a.localID,
		isLeader:  isLeader,
		version:   a.localVersion(),
		deadAfter: a.cfg.DeadServerAfter,
	})
}

// localVersion is the release this server runs as.
func (a *Autopilot) localVersion() string {
	if a.cfg.LocalVersion != "" {
		return a.cfg.LocalVersion
	}
	return version.Version
}

// FetchServerStats probes the given servers concurrently and remembers each
// answer. It returns when all answered or ctx is done, whichever is first.
// The local server is measured from raft directly.
func (d *delegate) FetchServerStats(ctx context.Context, servers map[raft.ServerID]*raftautopilot.Server) map[raft.ServerID]*raftautopilot.ServerStats {
	a := (*Autopilot)(d)
	a.mu.Lock()
	r := a.cur
	a.mu.Unlock()
	if r == nil {
		// Stopping: the library keeps each server's previous stats.
		return nil
	}

	var (
		mu  sync.Mutex
		out = make(map[raft.ServerID]*raftautopilot.ServerStats, len(servers))
		wg  sync.WaitGroup
	)
	for id, srv := range servers {
		if id == a.localID {
			st := localStats(a.cfg.Raft.Stats(), a.cfg.Raft.LastIndex())
			if a.recordLocal(r, st) {
				mu.Lock()
				out[id] = &st
				mu.Unlock()
			}
			continue
		}
		rpcAddr := srv.Meta[metaRPCAddr]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				resp *droverv1.ServerInfoResponse
				err  = errNoRPCAddr
			)
			start := time.Now()
			if rpcAddr != "" {
				resp, err = a.cfg.FetchInfo(ctx, rpcAddr)
			}
			if st, ok := a.recordProbe(r, id, rpcAddr, start, resp, err); ok {
				mu.Lock()
				out[id] = &st
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// A FetchInfo ignoring its context must not stall the library;
		// its late answer is still recorded for the next round.
	}
	mu.Lock()
	defer mu.Unlock()
	res := make(map[raft.ServerID]*raftautopilot.ServerStats, len(out))
	for id, st := range out {
		res[id] = st
	}
	return res
}

// recordLocal stores the leader's own measurement; false if r is no longer
// the current run.
func (a *Autopilot) recordLocal(r *run, st raftautopilot.ServerStats) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur != r {
		return false
	}
	a.probes[a.localID] = &probe{stats: st, measured: true}
	return true
}

// recordProbe stores one probe's outcome and returns the stats to hand to
// the library; false if they should not be (stale run, or we are stopping).
func (a *Autopilot) recordProbe(r *run, id raft.ServerID, rpcAddr string, start time.Time,
	resp *droverv1.ServerInfoResponse, err error) (raftautopilot.ServerStats, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur != r {
		return raftautopilot.ServerStats{}, false
	}
	if err != nil && r.ctx.Err() != nil {
		// Cancelled by Stop, not the server's fault.
		return raftautopilot.ServerStats{}, false
	}
	if err == nil {
		if got := resp.GetServer().GetId(); got != "" && got != string(id) {
			// The address now belongs to someone else: the server we
			// want is not there.
			err = fmt.Errorf("%s answered as server %q", rpcAddr, got)
		}
	}
	p := a.probes[id]
	if p == nil {
		p = &probe{}
		a.probes[id] = p
	}
	switch {
	case errors.Is(err, errNoRPCAddr):
		// Not evidence that the server is down, so no failure clock: we
		// never remove a server we could not even try to reach.
		p.err = err
		p.failingSince = time.Time{}
		p.stats.LastContact = noContact
	case err != nil:
		if p.failingSince.IsZero() {
			p.failingSince = start
		}
		p.err = err
		// Keep the last index and term, so the operator sees how far it
		// got, but mark it unhealthy.
		p.stats.LastContact = noContact
	default:
		p.info = resp
		p.err = nil
		p.failingSince = time.Time{}
		p.stats = statsFromInfo(resp)
		p.measured = true
	}
	return p.stats, true
}

// RemoveFailedServer removes a server that has been unreachable for
// DeadServerAfter from raft and then drops its record. The library only
// notifies here (it removes "stale" servers itself, failed ones never), and
// expects a prompt return, so the work runs in a goroutine.
func (d *delegate) RemoveFailedServer(srv *raftautopilot.Server) {
	a := (*Autopilot)(d)
	if srv == nil {
		return
	}
	if srv.ID == a.localID {
		a.log.Warn("refusing to remove the local server", "id", srv.ID)
		return
	}
	a.mu.Lock()
	r := a.cur
	if r == nil || r.ctx.Err() != nil || r.removing[srv.ID] {
		a.mu.Unlock()
		return
	}
	r.removing[srv.ID] = true
	r.removals.Add(1)
	a.mu.Unlock()

	go a.removeFailed(r, *srv)
}

// removeFailed does the work of RemoveFailedServer.
func (a *Autopilot) removeFailed(r *run, srv raftautopilot.Server) {
	defer func() {
		a.mu.Lock()
		delete(r.removing, srv.ID)
		a.mu.Unlock()
		r.removals.Done()
	}()

	// The library decided on a snapshot; the server may have answered
	// since. Removing a live voter costs the cluster a member for nothing.
	a.mu.Lock()
	if a.cur != r {
		a.mu.Unlock()
		return
	}
	var (
		since   time.Time
		lastErr error
	)
	if p := a.probes[srv.ID]; p != nil {
		since, lastErr = p.failingSince, p.err
	}
	a.mu.Unlock()
	if nodeStatus(time.Now(), since, a.cfg.DeadServerAfter) != raftautopilot.NodeFailed {
		a.log.Info("not removing server: it answered again", "id", srv.ID)
		return
	}

	a.log.Warn("removing failed server from raft",
		"id", srv.ID, "raft_addr", srv.Address, "rpc_addr", srv.Meta[metaRPCAddr],
		"unreachable_for", time.Since(since).Round(time.Millisecond),
		"dead_server_after", a.cfg.DeadServerAfter, "last_error", lastErr)
	f := a.cfg.Raft.RemoveServer(srv.ID, 0, removeEnqueueTimeout)
	if err := f.Error(); err != nil {
		// The next reconcile round tries again if we are still leader.
		a.log.Error("removing failed server from raft", "id", srv.ID, "error", err)
		return
	}
	a.log.Info("removed failed server from raft", "id", srv.ID, "index", f.Index())

	a.mu.Lock()
	if a.cur == r {
		delete(a.probes, srv.ID)
	}
	a.mu.Unlock()

	if a.cfg.RemoveRecord == nil {
		return
	}
	var err error
	for attempt := 1; attempt <= recordAttempts; attempt++ {
		ctx, cancel := context.WithTimeout(r.ctx, recordTimeout)
		err = a.cfg.RemoveRecord(ctx, string(srv.ID))
		cancel()
		if err == nil {
			a.log.Info("removed record of failed server", "id", srv.ID)
			return
		}
		if attempt == recordAttempts || r.ctx.Err() != nil {
			break
		}
		t := time.NewTimer(time.Duration(attempt) * recordBackoff)
		select {
		case <-r.ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if r.ctx.Err() != nil {
			break
		}
	}
	// Once out of raft the server is no longer seen by autopilot, so
	// nothing retries this; the record is left for an operator.
	a.log.Error("removing record of failed server; it stays recorded although it left raft",
		"id", srv.ID, "error", err)
}
