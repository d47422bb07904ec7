package server

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/version"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// knows reports whether a server of release v knows raft entry type t: t is
// in the entry type table and was introduced at or before v. Pre-release
// suffixes are ignored, so a 0.2.0-dev server knows 0.2.0's types; an
// invalid or empty version knows nothing.
func knows(v string, t droverv1.MessageType) bool {
	since, ok := t.Since()
	return ok && version.AtLeast(v, since)
}

// serverVersion is a server of the raft configuration with the version it
// announced, empty while it has not announced one.
type serverVersion struct {
	id      string
	version string
}

func (sv serverVersion) String() string {
	if sv.version == "" {
		return sv.id + " (not announced)"
	}
	return sv.id + " (" + sv.version + ")"
}

// noneAnnounced reports whether no server of servers has announced a
// release yet: each does once it runs and knows a leader, so right after a
// cluster starts or a server joins that is a wait, not a server to
// upgrade.
func noneAnnounced(servers []serverVersion) bool {
	for _, sv := range servers {
		if sv.version != "" {
			return false
		}
	}
	return true
}

// describeServers lists servers for logs and errors.
func describeServers(servers []serverVersion) string {
	parts := make([]string, len(servers))
	for i, sv := range servers {
		parts[i] = sv.String()
	}
	return strings.Join(parts, ", ")
}

// versionGate lets the leader write an entry type only once every server in
// the raft configuration announces a release that knows it. It keeps the
// configuration's servers with their announced versions and computes them
// again only when the servers table or the raft configuration has changed,
// so a gated write costs a lookup of the servers table's index, not a read
// of the configuration; types of the first release are not gated at all.
type versionGate struct {
	raft  *raft.Raft
	state *state.StateStore

	// generation counts the raft observations that may come with a new
	// configuration: a peer added or removed while leading (raft reports
	// every configuration change of a leader so), a leader change.
	generation atomic.Uint64
	view       atomic.Pointer[gateView]

	mu sync.Mutex
	// changed is closed and replaced at every generation.
	changed chan struct{}
}

// gateView is the configuration's servers as of one generation and one
// write of the servers table.
type gateView struct {
	generation   uint64
	serversIndex uint64
	servers      []serverVersion // in id order
}

// newVersionGate watches r for configuration changes. raft calls an
// observer's filter synchronously for every observation, before the
// configuration change it reports returns, so counting there misses
// nothing; the filter lets nothing through to a channel.
func newVersionGate(r *raft.Raft, st *state.StateStore) *versionGate {
	g := &versionGate{raft: r, state: st, changed: make(chan struct{})}
	r.RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.PeerObservation, raft.LeaderObservation:
			g.bump()
		}
		return false
	}))
	return g
}

func (g *versionGate) bump() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.generation.Add(1)
	close(g.changed)
	g.changed = make(chan struct{})
}

// changedCh returns a channel closed at the next configuration change.
// Take it before reading the servers, so that no change is missed.
func (g *versionGate) changedCh() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// check returns nil if every server knows t, and otherwise an error
// wrapping rpc.ErrFailedPrecondition that names the servers behind and
// their versions.
func (g *versionGate) check(t droverv1.MessageType) error {
	if !t.Gated() {
		return nil
	}
	since, ok := t.Since()
	if !ok {
		return fmt.Errorf("write entry of type %s: %w: not in the entry type table", t, rpc.ErrFailedPrecondition)
	}
	behind, err := g.behind(t)
	if err != nil {
		return err
	}
	if len(behind) > 0 {
		return fmt.Errorf("write %s entry: %w: it needs release %s or later on every server, and these servers are behind: %s; upgrade them first",
			t, rpc.ErrFailedPrecondition, since, describeServers(behind))
	}
	return nil
}

// behind lists the servers of the raft configuration whose announced
// version does not know t; a server that has announced none is behind.
func (g *versionGate) behind(t droverv1.MessageType) ([]serverVersion, error) {
	v, err := g.current()
	if err != nil {
		return nil, err
	}
	var out []serverVersion
	for _, sv := range v.servers {
		if !knows(sv.version, t) {
			out = append(out, sv)
		}
	}
	return out, nil
}

// current returns the view of the configuration, computed again if the
// configuration or the servers table changed since. The generation is
// read before the configuration: a change in between leaves a view that
// the next call computes again, never a stale view that looks current.
func (g *versionGate) current() (*gateView, error) {
	gen := g.generation.Load()
	snap := g.state.Snapshot()
	serversIndex := snap.TableIndex(state.TableServers)
	if v := g.view.Load(); v != nil && v.generation == gen && v.serversIndex == serversIndex {
		return v, nil
	}
	future := g.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return nil, fmt.Errorf("read raft configuration: %w: %v", rpc.ErrUnavailable, err)
	}
	v := &gateView{generation: gen, serversIndex: serversIndex, servers: configuredVersions(future.Configuration(), snap)}
	g.view.Store(v)
	return v, nil
}

// configuredVersions pairs every server of conf with the version its
// record in snap announces.
func configuredVersions(conf raft.Configuration, snap *state.Snapshot) []serverVersion {
	out := make([]serverVersion, 0, len(conf.Servers))
	for _, srv := range conf.Servers {
		sv := serverVersion{id: string(srv.ID)}
		if m := snap.ServerByID(sv.id); m != nil {
			sv.version = m.GetVersion()
		}
		out = append(out, sv)
	}
	slices.SortFunc(out, func(a, b serverVersion) int { return strings.Compare(a.id, b.id) })
	return out
}
