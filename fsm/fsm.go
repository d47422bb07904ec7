// Package fsm is drover's raft state machine. Every server applies the same
// log entries in the same order through it: it decodes an entry by its
// message-type byte, applies it to the state store and publishes the objects
// it wrote as events. It must be deterministic: nothing here reads the clock,
// randomness or the environment; times come inside the entries.
package fsm

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// FSM implements raft.FSM over the state store.
//
// raft calls Apply, Snapshot and Restore from one goroutine; Persist of a
// snapshot may run concurrently with Apply, which is safe because a state
// snapshot is an immutable view.
type FSM struct {
	state   *state.StateStore
	events  *events.Broker
	logger  *slog.Logger
	hooks   Hooks
	release Release
	halt    halt
	// portable scans entries and snapshot records (portable.go).
	portable droverv1.WireScanners
}

// New returns an FSM that applies entries to st and publishes events to
// broker.
func New(st *state.StateStore, broker *events.Broker, logger *slog.Logger) *FSM {
	return &FSM{state: st, events: broker, logger: logger, halt: newHalt()}
}

// SetHooks installs the leader-side hooks. Call it before raft starts
// applying entries.
func (f *FSM) SetHooks(h Hooks) { f.hooks = h }

// Apply applies one committed log entry. It returns nil, or an error when
// the state store refused the entry (nothing was written), or for entries
// that are applied part by part the result of each part: a
// *state.RegisterResult for NodeRegister, a *state.ClientUpdateResult for
// AllocClientUpdate, a *state.NodeStatusResult for NodeStatusBatch, a
// *state.GCResult for GC. JobRegister and JobDeregister return the request's
// *droverv1.JobRequestResult: the first application's when the entry's
// request id was already applied (then nothing was written).
// ClusterMetadata returns the stored *droverv1.ClusterMetadata. raft hands
// the value back to the proposer through ApplyFuture.Response.
//
// Strings that are not valid UTF-8, which older servers let into the log,
// are repaired before they are applied (see makePortable).
// Durations that releases before 0.3 wrote as nanoseconds are moved into
// their Duration fields (see upgradeLegacy).
//
// An entry of a type this server's release does not know is skipped when
// the type is marked ignorable. Otherwise (an unknown type below 128, or an
// entry that does not decode) applying anything more would let this
// server's state diverge from the others': the FSM halts (see Halted) and
// answers this entry and every later one with the *Halt.
func (f *FSM) Apply(l *raft.Log) any {
	if h := f.Halted(); h != nil {
		return h
	}
	msgType, msg, err := f.decode(l.Data)
	if errors.Is(err, ErrIgnorableType) {
		f.logger.Warn("skipping raft entry of unknown ignorable type", "index", l.Index, "type", msgType.String(), "version", f.release.Version)
		f.state.MarkApplied(l.Index)
		return nil
	}
	if err != nil {
		return f.stop(l.Index, msgType, err)
	}
	if n := f.makePortable(msg.(proto.Message), l.Data[1:]); n > 0 {
		f.logger.Warn("repaired a raft entry holding invalid UTF-8 or malformed unknown fields, written by an older server",
			"index", l.Index, "type", msgType, "repaired", n)
	}
	upgradeLegacy(msg)
	return f.apply(l.Index, msgType, msg)
}

// apply dispatches a decoded entry to the state store and publishes the
// events of what it wrote.
func (f *FSM) apply(index uint64, msgType droverv1.MessageType, msg any) any {
	var (
		changes []state.Change
		result  any
		err     error
	)
	switch m := msg.(type) {
	case *droverv1.NodeRegisterEntry:
		var res *state.RegisterResult
		res, changes, err = f.state.UpsertNodes(index, m)
		result = res
	case *droverv1.NodeStatusEntry:
		changes, err = f.state.UpdateNodeStatus(index, m)
	case *droverv1.NodeStatusBatchEntry:
		var res *state.NodeStatusResult
		res, changes, err = f.state.UpdateNodeStatuses(index, m)
		result = res
	case *droverv1.AllocClientUpdateEntry:
		var res *state.ClientUpdateResult
		if msgType == droverv1.MessageTypeAllocClientReport {
			res, changes, err = f.state.UpdateAllocsFromClientFirstReports(index, m)
		} else {
			res, changes, err = f.state.UpdateAllocsFromClient(index, m)
		}
		result = res
	case *droverv1.JobRegisterEntry:
		var res *droverv1.JobRequestResult
		res, changes, err = f.state.UpsertJob(index, m)
		result = res
	case *droverv1.JobDeregisterEntry:
		var res *droverv1.JobRequestResult
		res, changes, err = f.state.DeregisterJob(index, m)
		result = res
	case *droverv1.EvalUpdateEntry:
		changes, err = f.state.UpsertEvals(index, m)
	case *droverv1.PlanResultEntry:
		changes, err = f.state.UpsertPlanResults(index, m)
	case *droverv1.ServerUpsertEntry:
		changes, err = f.state.UpsertServer(index, m)
	case *droverv1.ServerRemoveEntry:
		changes, err = f.state.RemoveServer(index, m)
	case *droverv1.NodeEligibilityEntry:
		changes, err = f.state.UpdateNodeEligibility(index, m)
	case *droverv1.NodeDrainEntry:
		changes, err = f.state.UpdateNodeDrain(index, m)
	case *droverv1.AllocDesiredTransitionEntry:
		changes, err = f.state.UpdateAllocTransitions(index, m)
	case *droverv1.GCEntry:
		var res *state.GCResult
		res, changes, err = f.state.ApplyGC(index, m)
		result = res
	case *droverv1.DeploymentStatusUpdateEntry:
		changes, err = f.state.UpdateDeploymentStatus(index, m)
	case *droverv1.DeploymentPromoteEntry:
		changes, err = f.state.PromoteDeployment(index, m)
	case *droverv1.ACLBootstrapEntry:
		changes, err = f.state.BootstrapACL(index, m)
	case *droverv1.ACLPolicyEntry:
		changes, err = f.state.ApplyACLPolicies(index, m)
	case *droverv1.ACLTokenEntry:
		changes, err = f.state.ApplyACLTokens(index, m)
	case *droverv1.ClusterMetadataEntry:
		var res *droverv1.ClusterMetadata
		res, changes, err = f.state.SetClusterMetadata(index, m)
		result = res
	default:
		// Decode returns only the types above.
		panic(fmt.Sprintf("fsm: no applier for %T (type %s) at index %d", msg, msgType, index))
	}
	if err != nil {
		return fmt.Errorf("apply %s entry at index %d: %w", msgType, index, err)
	}
	f.events.Publish(index, toEvents(index, msgType, changes))
	f.notifyHooks(index, changes)
	return result
}

// State returns the state store the FSM applies to.
func (f *FSM) State() *state.StateStore { return f.state }
