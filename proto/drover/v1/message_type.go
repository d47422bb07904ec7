package droverv1

import "fmt"

// MessageType is the first byte of every raft log entry; it names the
// message that follows. The values are part of the log format: never
// renumber or reuse one.
type MessageType uint8

// Message types of raft log entries. Types at or above
// IgnoreUnknownTypeFlag may be skipped by a server that does not know them,
// so new optional entry kinds can be rolled out one server at a time. The
// low seven bits stay unique across all types, flagged or not.
const (
	MessageTypeNodeRegister      MessageType = 1  // NodeRegisterEntry
	MessageTypeNodeStatus        MessageType = 2  // NodeStatusEntry
	MessageTypeAllocClientUpdate MessageType = 3  // AllocClientUpdateEntry
	MessageTypeJobRegister       MessageType = 4  // JobRegisterEntry
	MessageTypeJobDeregister     MessageType = 5  // JobDeregisterEntry
	MessageTypeEvalUpdate        MessageType = 6  // EvalUpdateEntry
	MessageTypePlanResult        MessageType = 7  // PlanResultEntry
	MessageTypeServerUpsert      MessageType = 8  // ServerUpsertEntry
	MessageTypeServerRemove      MessageType = 9  // ServerRemoveEntry
	MessageTypeNodeEligibility   MessageType = 10 // NodeEligibilityEntry
	MessageTypeNodeDrain         MessageType = 11 // NodeDrainEntry
	MessageTypeGC                MessageType = 12 // GCEntry
	MessageTypeNodeStatusBatch   MessageType = 13 // NodeStatusBatchEntry
	MessageTypeAllocTransition   MessageType = 14 // AllocDesiredTransitionEntry

	// MessageTypeJobRegisterChecked is a JobRegisterEntry with
	// enforce_index set: a registration applied only if the job's
	// job_modify_index still matches. Its own type rather than a new field
	// of JobRegister, because a server that does not know the check would
	// apply the entry without it and diverge.
	MessageTypeJobRegisterChecked MessageType = 16
	// MessageTypeDeploymentStatus is a DeploymentStatusUpdateEntry; the
	// scheduler creates deployments only once every server knows it.
	MessageTypeDeploymentStatus  MessageType = 17
	MessageTypeDeploymentPromote MessageType = 18 // DeploymentPromoteEntry
	MessageTypeACLBootstrap      MessageType = 19 // ACLBootstrapEntry
	MessageTypeACLPolicy         MessageType = 20 // ACLPolicyEntry
	MessageTypeACLToken          MessageType = 21 // ACLTokenEntry
	// MessageTypeAllocClientReport is an AllocClientUpdateEntry that
	// rewrites a reporting node's row only for its first report since it
	// last missed a heartbeat. Its own type, because a server that applied
	// it as an AllocClientUpdate would rewrite the row every time and its
	// state would differ from the others'.
	MessageTypeAllocClientReport MessageType = 22

	// MessageTypeClusterMetadata is a ClusterMetadataEntry. Ignorable: a
	// server that does not know it loses nothing but the cluster id.
	MessageTypeClusterMetadata MessageType = IgnoreUnknownTypeFlag | 15

	// IgnoreUnknownTypeFlag is set on message types that older servers may
	// skip when they do not know them.
	IgnoreUnknownTypeFlag MessageType = 128
)

// FirstRelease is drover's first release. Every server that can be part of
// a cluster knows the entry types it introduced, so they are never gated.
const FirstRelease = "0.1.0"

// EntryType describes one kind of raft log entry.
type EntryType struct {
	Type MessageType
	// Name names the type in logs and errors.
	Name string
	// Since is the release that introduced the type (semantic versioning
	// without a leading "v"). A server knows the type when its own release
	// is at least Since; the leader writes the type only once every server
	// announces such a release.
	Since string
}

// entryTypes is the table of every entry type, indexed by type. It is
// read-only. A new type gets a row with the release that introduces it;
// existing rows never change.
var entryTypes = [256]EntryType{
	MessageTypeNodeRegister:       {MessageTypeNodeRegister, "NodeRegister", FirstRelease},
	MessageTypeNodeStatus:         {MessageTypeNodeStatus, "NodeStatus", FirstRelease},
	MessageTypeAllocClientUpdate:  {MessageTypeAllocClientUpdate, "AllocClientUpdate", FirstRelease},
	MessageTypeJobRegister:        {MessageTypeJobRegister, "JobRegister", FirstRelease},
	MessageTypeJobDeregister:      {MessageTypeJobDeregister, "JobDeregister", FirstRelease},
	MessageTypeEvalUpdate:         {MessageTypeEvalUpdate, "EvalUpdate", FirstRelease},
	MessageTypePlanResult:         {MessageTypePlanResult, "PlanResult", FirstRelease},
	MessageTypeServerUpsert:       {MessageTypeServerUpsert, "ServerUpsert", FirstRelease},
	MessageTypeServerRemove:       {MessageTypeServerRemove, "ServerRemove", FirstRelease},
	MessageTypeNodeEligibility:    {MessageTypeNodeEligibility, "NodeEligibility", FirstRelease},
	MessageTypeNodeDrain:          {MessageTypeNodeDrain, "NodeDrain", FirstRelease},
	MessageTypeGC:                 {MessageTypeGC, "GC", FirstRelease},
	MessageTypeNodeStatusBatch:    {MessageTypeNodeStatusBatch, "NodeStatusBatch", FirstRelease},
	MessageTypeAllocTransition:    {MessageTypeAllocTransition, "AllocTransition", FirstRelease},
	MessageTypeClusterMetadata:    {MessageTypeClusterMetadata, "ClusterMetadata", "0.2.0"},
	MessageTypeJobRegisterChecked: {MessageTypeJobRegisterChecked, "JobRegisterChecked", "0.2.0"},
	MessageTypeDeploymentStatus:   {MessageTypeDeploymentStatus, "DeploymentStatus", "0.2.0"},
	MessageTypeDeploymentPromote:  {MessageTypeDeploymentPromote, "DeploymentPromote", "0.2.0"},
	MessageTypeACLBootstrap:       {MessageTypeACLBootstrap, "ACLBootstrap", "0.3.0"},
	MessageTypeACLPolicy:          {MessageTypeACLPolicy, "ACLPolicy", "0.3.0"},
	MessageTypeACLToken:           {MessageTypeACLToken, "ACLToken", "0.3.0"},
	MessageTypeAllocClientReport:  {MessageTypeAllocClientReport, "AllocClientReport", "0.3.0"},
}

// EntryTypes lists every entry type in type order.
func EntryTypes() []EntryType {
	var out []EntryType
	for _, e := range entryTypes {
		if e.Name != "" {
			out = append(out, e)
		}
	}
	return out
}

// Since returns the release that introduced t, and false for a type not in
// the table.
func (t MessageType) Since() (string, bool) {
	e := entryTypes[t]
	return e.Since, e.Name != ""
}

// Gated reports whether the leader must check the servers' versions before
// writing t: every type introduced after the first release is, and so is a
// type not in the table.
func (t MessageType) Gated() bool {
	return entryTypes[t].Since != FirstRelease
}

// Ignorable reports whether a server that does not know t may skip it.
func (t MessageType) Ignorable() bool { return t&IgnoreUnknownTypeFlag != 0 }

// String names the message type for logs and errors.
func (t MessageType) String() string {
	if e := entryTypes[t]; e.Name != "" {
		return e.Name
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}
