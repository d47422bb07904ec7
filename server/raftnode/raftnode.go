// Package raftnode owns the raft plumbing of one drover server: the bolt log
// and stable store, the file snapshot store, the TCP transport (over mutual
// TLS when configured) and the *raft.Raft built on them. The rest of the
// server sees only *raft.Raft and leadership notifications.
package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

const (
	defaultSnapshotThreshold = 8192
	defaultSnapshotInterval  = 2 * time.Minute
	defaultTrailingLogs      = 10240
	defaultMaxAppendEntries  = 256

	logCacheSize      = 512 // recent entries kept in memory so replication rarely reads bolt
	snapshotsRetained = 2
	transportMaxPool  = 3
	transportTimeout  = 10 * time.Second
	// notifyBuffer absorbs leadership flaps: raft blocks its leader loop on a
	// full NotifyCh (raft.go runLeader), and raft.LeaderCh coalesces values so
	// a consumer can miss a lost-then-regained transition.
	notifyBuffer = 16
	// boltOpenTimeout bounds the wait for bolt's file lock; bolt's default is
	// to wait forever, which would hang a second server pointed at the same
	// data dir instead of failing it.
	boltOpenTimeout = time.Second
)

// Config describes one server's raft node.
type Config struct {
	// ServerID is the raft server id; it must be stable across restarts.
	ServerID string
	// DataDir holds raft state in DataDir/raft: raft.db for the log and stable
	// store and snapshots/ for the file snapshot store.
	DataDir string
	// BindAddr is the host:port the raft transport listens on; port 0 picks a
	// free port.
	BindAddr string
	// AdvertiseAddr is the host:port other servers reach this one on (port 0
	// means the bound port; a host name is resolved once, in New). Empty means
	// the bound address, which is an error when BindAddr's host is unspecified
	// (e.g. 0.0.0.0).
	AdvertiseAddr string
	// FSM is the replicated state machine.
	FSM raft.FSM
	// Logger receives raft's own logs through NewHCLogger; nil means
	// slog.Default().
	Logger *slog.Logger
	// Bootstrap bootstraps a single-server cluster of just this server when
	// there is no existing raft state. Existing state is never re-bootstrapped.
	Bootstrap bool

	// SnapshotThreshold is the number of entries between snapshots (8192).
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks whether to snapshot (2m).
	SnapshotInterval time.Duration
	// TrailingLogs is the number of log entries kept after a snapshot (10240).
	TrailingLogs uint64
	// MaxAppendEntries bounds entries per AppendEntries RPC and how many
	// concurrent Apply calls are grouped into one disk write (256, max 1024).
	MaxAppendEntries int
	// TimingMultiplier scales raft's HeartbeatTimeout, ElectionTimeout and
	// LeaderLeaseTimeout; 0 or 1 keeps raft's defaults.
	TimingMultiplier int
	// TLS, if set, runs the transport over mutual TLS; nil is plaintext TCP.
	TLS *TLS
	// MinFreeSpace is the free-space reserve of the data dir's file system
	// in bytes: below it, log appends and snapshots are refused
	// (ErrDataDirFull) so that raft can still record terms and votes. 0
	// refuses them only after a write failed for lack of space.
	MinFreeSpace uint64
}

// Node is one server's raft instance together with the stores and transport
// it owns.
type Node struct {
	id     string
	raft   *raft.Raft
	trans  *raft.NetworkTransport
	store  *raftboltdb.BoltStore
	guard  *spaceGuard
	logs   raft.LogStore // store behind the cache of recent entries
	dbPath string
	notify chan bool
	addr   raft.ServerAddress

	shutdownOnce sync.Once
	shutdownErr  error
}

// New opens the stores and transport, bootstraps a single-server cluster if
// cfg.Bootstrap is set and there is no raft state, and starts raft. On error
// everything opened so far is closed again.
func New(cfg Config) (*Node, error) {
	switch {
	case cfg.ServerID == "":
		return nil, errors.New("raftnode: ServerID is required")
	case cfg.DataDir == "":
		return nil, fmt.Errorf("raftnode %s: DataDir is required", cfg.ServerID)
	case cfg.FSM == nil:
		return nil, fmt.Errorf("raftnode %s: FSM is required", cfg.ServerID)
	case cfg.TLS != nil && (cfg.TLS.Listen == nil || cfg.TLS.Dial == nil):
		return nil, fmt.Errorf("raftnode %s: TLS needs both a listen and a dial configuration", cfg.ServerID)
	}
	slogger := cfg.Logger
	if slogger == nil {
		slogger = slog.Default()
	}
	logger := NewHCLogger(cfg.Logger, "raft")
	notify := make(chan bool, notifyBuffer)
	rc := raftConfig(cfg, logger, notify)
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raftnode %s: invalid raft config: %w", cfg.ServerID, err)
	}
	addrs, err := planTransport(cfg.BindAddr, cfg.AdvertiseAddr)
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: %w", cfg.ServerID, err)
	}

	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftnode %s: create raft dir %s: %w", cfg.ServerID, dir, err)
	}

	// Undo in reverse order on failure: bolt holds a file lock and the
	// transport a listener plus its accept goroutine.
	var cleanups []func() error
	started := false
	defer func() {
		if !started {
			for i := len(cleanups) - 1; i >= 0; i-- {
				_ = cleanups[i]()
			}
		}
	}()

	dbPath := filepath.Join(dir, raftDBName)
	if err := verifyBoltFile(dbPath); err != nil {
		return nil, fmt.Errorf("raftnode %s: %w", cfg.ServerID, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        dbPath,
		BoltOptions: boltOptions(),
		NoSync:      false, // every StoreLogs batch is fsynced: raft's durability depends on it
	})
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: open bolt store %s: %w", cfg.ServerID, dbPath, err)
	}
	cleanups = append(cleanups, store.Close)

	storeLogger := slogger.With("component", "raft.store")
	guard := newSpaceGuard(cfg.DataDir, cfg.MinFreeSpace, storeLogger)
	checked, err := newCheckedStore(store, dbPath, guard, storeLogger)
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: %w", cfg.ServerID, err)
	}
	// Everything raft reads at start is verified first: raft itself panics
	// on an unreadable entry, and would apply a damaged one.
	restorable, err := verifyState(checked, dir, cfg.ServerID, storeLogger)
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: %w", cfg.ServerID, err)
	}
	logs, err := raft.NewLogCache(logCacheSize, checked)
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: log cache: %w", cfg.ServerID, err)
	}
	// The file snapshot store appends "snapshots" to the directory itself.
	files, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, logger.Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: open snapshot store in %s: %w", cfg.ServerID, dir, err)
	}
	if restorable != nil {
		checked.noteSnapshot(restorable.Index, restorable.Term)
	}
	snaps := &guardedSnapshots{SnapshotStore: files, dir: filepath.Join(dir, snapshotsDir), guard: guard,
		completed: checked.noteSnapshot, verified: restorable}

	trans, err := newTransport(addrs, cfg.TLS, logger.Named("net"))
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: raft transport on %s: %w", cfg.ServerID, cfg.BindAddr, err)
	}
	cleanups = append(cleanups, trans.Close)
	addr := trans.LocalAddr()

	hasState, err := raft.HasExistingState(logs, checked, snaps)
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: check existing raft state in %s: %w", cfg.ServerID, dir, err)
	}
	if !hasState && cfg.Bootstrap {
		conf := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       rc.LocalID,
			Address:  addr,
		}}}
		if err := raft.BootstrapCluster(rc, logs, checked, snaps, trans, conf); err != nil {
			return nil, fmt.Errorf("raftnode %s: bootstrap at %s: %w", cfg.ServerID, addr, err)
		}
	}

	// NewRaft restores the newest snapshot into the FSM synchronously. Log
	// entries after it are re-applied only once they are known committed
	// again (commit index is not persisted): for a lone server, after it wins
	// the election and commits its first entry of the new term.
	r, err := raft.NewRaft(rc, cfg.FSM, logs, checked, snaps, transport{trans})
	if err != nil {
		return nil, fmt.Errorf("raftnode %s: start raft in %s: %w", cfg.ServerID, dir, err)
	}
	started = true
	return &Node{
		id:     cfg.ServerID,
		raft:   r,
		trans:  trans,
		store:  store,
		guard:  guard,
		logs:   logs,
		dbPath: dbPath,
		notify: notify,
		addr:   addr,
	}, nil
}

// raftConfig is raft.DefaultConfig (keeping its 1s heartbeat/election and
// 500ms lease timeouts) with this node's identity, logging and tuning.
func raftConfig(cfg Config, logger hclog.Logger, notify chan<- bool) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ServerID)
	rc.Logger = logger
	rc.NotifyCh = notify
	rc.SnapshotThreshold = orDefault(cfg.SnapshotThreshold, defaultSnapshotThreshold)
	rc.SnapshotInterval = orDefault(cfg.SnapshotInterval, defaultSnapshotInterval)
	rc.TrailingLogs = orDefault(cfg.TrailingLogs, defaultTrailingLogs)
	rc.MaxAppendEntries = orDefault(cfg.MaxAppendEntries, defaultMaxAppendEntries)
	// Group commit. The leader loop (raft.go leaderLoop, "case newLog :=
	// <-r.applyCh") takes one Apply, then drains applyCh without blocking for
	// up to MaxAppendEntries more, and dispatchLogs writes the whole batch
	// with a single StoreLogs call: one bolt transaction, one fsync. With
	// BatchApplyCh, applyCh has a buffer of MaxAppendEntries, so Apply calls
	// made while the leader loop is busy with the previous fsync are queued
	// and return their future at once instead of each blocking on a channel
	// handoff; the next drain picks all of them up as one batch. The price
	// (config.go, BatchApplyCh): Apply's timeout only bounds enqueueing, so an
	// entry may wait in the buffer past it.
	rc.BatchApplyCh = true
	if m := time.Duration(cfg.TimingMultiplier); m > 1 {
		rc.HeartbeatTimeout *= m
		rc.ElectionTimeout *= m
		rc.LeaderLeaseTimeout *= m
	}
	// A follower learns that an entry committed from the next
	// AppendEntries; when no new entry follows, that is the one raft sends
	// after CommitTimeout (50ms by default, replication.go). Scheduler
	// workers on followers wait for their local state to reach each
	// evaluation's index and each plan's, so that wait was the largest part
	// of a follower's scheduling latency. 5ms costs an idle cluster about a
	// hundred empty AppendEntries a second per follower.
	rc.CommitTimeout = commitTimeout
	return rc
}

// commitTimeout bounds how long followers wait to learn of a commit.
const commitTimeout = 5 * time.Millisecond

// boltOptions are the options of raft.db's bolt database, for the server
// and for OpenLog alike.
//
// Bolt by default writes its whole list of free pages with every commit.
// raft frees the pages of thousands of entries when it compacts the log
// after a snapshot, so from the first compaction on each append also
// wrote and fsynced hundreds of kilobytes of free list
// (BenchmarkAppendAfterCompaction). NoFreelistSync leaves it out: bolt
// rebuilds the list from the pages in use when it opens the file, as etcd
// and containerd configure it, and the file stays readable by bolt set
// either way (bolt marks the meta page "no free list" and rebuilds it on
// open). The hashmap free list finds runs of free pages without scanning
// the whole list, which the entries larger than a page need.
func boltOptions() *bbolt.Options {
	return &bbolt.Options{
		Timeout:        boltOpenTimeout,
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// transportPlan is what newTransport needs, worked out before anything is
// opened so address errors need no cleanup.
type transportPlan struct {
	bind string
	// advertise is nil to advertise the listener's own address.
	advertise *net.TCPAddr
	// advertiseBoundPort: advertise.Port must come from the listener, because
	// both BindAddr and AdvertiseAddr have port 0.
	advertiseBoundPort bool
}

func planTransport(bindAddr, advertiseAddr string) (transportPlan, error) {
	bindHost, bindPortStr, err := net.SplitHostPort(bindAddr)
	if err != nil {
		return transportPlan{}, fmt.Errorf("invalid BindAddr %q: %w", bindAddr, err)
	}
	bindPort, err := net.LookupPort("tcp", bindPortStr)
	if err != nil {
		return transportPlan{}, fmt.Errorf("invalid BindAddr %q: %w", bindAddr, err)
	}
	if advertiseAddr == "" {
		// raft would also refuse this (tcp_transport.go, errNotAdvertisable),
		// but only after binding and without saying which setting to fix.
		if ip := net.ParseIP(bindHost); bindHost == "" || (ip != nil && ip.IsUnspecified()) {
			return transportPlan{}, fmt.Errorf("BindAddr %q has an unspecified host: set AdvertiseAddr", bindAddr)
		}
		return transportPlan{bind: bindAddr}, nil
	}
	adv, err := net.ResolveTCPAddr("tcp", advertiseAddr)
	if err != nil {
		return transportPlan{}, fmt.Errorf("invalid AdvertiseAddr %q: %w", advertiseAddr, err)
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		return transportPlan{}, fmt.Errorf("AdvertiseAddr %q is not advertisable: it needs a specific host", advertiseAddr)
	}
	if adv.Port == 0 {
		adv.Port = bindPort
	}
	return transportPlan{bind: bindAddr, advertise: adv, advertiseBoundPort: adv.Port == 0}, nil
}

// newTransport opens the raft transport. raft's TCP transport advertises
// the listener's address when given a nil advertise address, which covers a
// port-0 BindAddr, and any fixed advertise port is known up front. Only an
// advertise host with port 0 on a port-0 bind needs the port before raft has
// listened; there we listen ourselves rather than listen, close and re-bind,
// which would race for the port. Over TLS we always listen ourselves.
func newTransport(p transportPlan, tlsCfg *TLS, logger hclog.Logger) (*raft.NetworkTransport, error) {
	if tlsCfg == nil && !p.advertiseBoundPort {
		var adv net.Addr // stays a nil interface: a typed nil *net.TCPAddr would make raft dereference it
		if p.advertise != nil {
			adv = p.advertise
		}
		return raft.NewTCPTransportWithLogger(p.bind, adv, transportMaxPool, transportTimeout, logger)
	}
	ln, err := net.Listen("tcp", p.bind)
	if err != nil {
		return nil, err
	}
	adv := ln.Addr()
	if p.advertise != nil {
		a := *p.advertise
		if p.advertiseBoundPort {
			a.Port = ln.Addr().(*net.TCPAddr).Port
		}
		adv = &a
	}
	var stream raft.StreamLayer = &tcpStreamLayer{Listener: ln, advertise: adv}
	if tlsCfg != nil {
		stream = &tlsStreamLayer{Listener: ln, advertise: adv, tls: *tlsCfg, handshakeTimeout: transportTimeout}
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
		Logger:  logger,
	}), nil
}

// tcpStreamLayer is raft.TCPStreamLayer over a listener we opened ourselves
// (raft's has unexported fields and always listens itself).
type tcpStreamLayer struct {
	net.Listener
	advertise net.Addr
}

func (t *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

func (t *tcpStreamLayer) Addr() net.Addr { return t.advertise }

// StorageError reports why this server cannot write to its data dir now:
// an error wrapping ErrDataDirFull (a *SpaceError) while the file system is
// below the free-space reserve or a write just failed for lack of space;
// nil when it can write.
func (n *Node) StorageError() error { return n.guard.check() }

// StorageFull returns a channel closed once this server finds its data dir
// full: when a write fails for lack of space, or a StorageError call (the
// leader's storage watch makes one every second) finds it below the
// reserve. Call it again after space is freed for a fresh channel.
func (n *Node) StorageFull() <-chan struct{} { return n.guard.fullSignal() }

// Raft returns the raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// HasState reports whether this server belongs to a cluster: it found raft
// state on disk, bootstrapped, or received a configuration from a leader.
// A server with state must never bootstrap.
func (n *Node) HasState() bool {
	future := n.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		// Only a shut-down raft fails here; claiming state is the safe
		// answer, since it keeps the server from bootstrapping.
		return true
	}
	return len(future.Configuration().Servers) > 0
}

// BootstrapCluster bootstraps a server with no raft state into the given
// configuration. Every server of a new cluster may bootstrap with the same
// configuration; raft refuses (raft.ErrCantBootstrap) when there is state.
func (n *Node) BootstrapCluster(servers []raft.Server) error {
	if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		return fmt.Errorf("raftnode %s: bootstrap %d servers: %w", n.id, len(servers), err)
	}
	return nil
}

// LogType returns the type of the log entry at index; ok is false when the
// entry is no longer in the log (a snapshot replaced it) or not yet in it.
func (n *Node) LogType(index uint64) (t raft.LogType, ok bool, err error) {
	var l raft.Log
	switch err := n.logs.GetLog(index, &l); {
	case errors.Is(err, raft.ErrLogNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("raftnode %s: read log entry %d: %w", n.id, index, err)
	}
	return l.Type, true, nil
}

// LeaderNotify delivers leadership transitions of this server: true when it
// became leader, false when it stopped being leader. It is raft's NotifyCh with
// a buffer; raft blocks its leader loop when the buffer is full, so it must be
// drained continuously. It is not closed by Shutdown.
func (n *Node) LeaderNotify() <-chan bool { return n.notify }

// Addr returns the advertised transport address, with the real port when
// BindAddr used port 0.
func (n *Node) Addr() raft.ServerAddress { return n.addr }

// Shutdown stops raft, then closes the transport and the bolt store, releasing
// its file lock. It is idempotent: later calls return the first call's result.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("shutdown raft: %w", err))
		}
		// raft's shutdown future already closes the transport (future.go
		// shutdownFuture.Error); Close is idempotent and this does not rely on it.
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close transport %s: %w", n.addr, err))
		}
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close bolt store %s: %w", n.dbPath, err))
		}
		if err := errors.Join(errs...); err != nil {
			n.shutdownErr = fmt.Errorf("raftnode %s: %w", n.id, err)
		}
	})
	return n.shutdownErr
}
