package rpc

import (
	"context"
	"time"

	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Entry is the payload of a raft entry: a generated message with
// vtprotobuf's marshalling.
type Entry interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// Backend is what the services need from the server that hosts them.
// Implementations must be safe for concurrent use.
type Backend interface {
	// Apply proposes a raft entry and returns once this server has applied
	// it: the entry's index and the FSM's response value. When the FSM
	// refused the entry, the refusal is the error (wrapping a state error
	// such as state.ErrNotFound). Errors wrapping ErrUnavailable mean the
	// entry was not committed here (no leader, leadership lost, shutting
	// down) and the call may be retried.
	Apply(ctx context.Context, msgType droverv1.MessageType, entry Entry) (index uint64, response any, err error)
	// State is this server's state store.
	State() *state.StateStore
	// Events is this server's event broker.
	Events() *events.Broker
	// KnownLeader reports whether this server knows a cluster leader.
	KnownLeader() bool
	// LastContact is how stale this server's state may be: zero on the
	// ready leader, otherwise the time since it last heard from a leader,
	// negative if it never has.
	LastContact() time.Duration
	// HeartbeatTTL is the time within which a node must heartbeat next,
	// for a node without a heartbeat timer (a down node registering).
	HeartbeatTTL() time.Duration
	// ResetHeartbeat restarts the node's heartbeat timer and returns the
	// time within which it must heartbeat next. It fails with
	// ErrUnavailable on a server that does not lead.
	ResetHeartbeat(nodeID string) (time.Duration, error)
	// Servers lists the RPC addresses of the servers, so that agents can
	// fail over.
	Servers() []string
	// ShutdownCh is closed when the server starts shutting down, so that
	// blocking queries and streams return at once.
	ShutdownCh() <-chan struct{}
	// EntryTypeKnown reports whether every server of the cluster knows
	// entry type t, so that Apply would not refuse it: writers with an
	// older type that does the same job fall back to it when not.
	EntryTypeKnown(t droverv1.MessageType) bool
}
