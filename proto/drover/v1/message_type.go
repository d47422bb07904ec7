package droverv1

import "fmt"

// MessageType is the first byte of every raft log entry; it names the
// message that follows. The values are part of the log format: never
// renumber or reuse one.
type MessageType uint8

// Message types of raft log entries. Types at or above
// IgnoreUnknownTypeFlag may be skipped by a server that does not know them,
// so new optional entry kinds can be rolled out one server at a time.
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

	// IgnoreUnknownTypeFlag is set on message types that older servers may
	// skip when they do not know them.
	IgnoreUnknownTypeFlag MessageType = 128
)

// Ignorable reports whether a server that does not know t may skip it.
func (t MessageType) Ignorable() bool { return t&IgnoreUnknownTypeFlag != 0 }

// String names the message type for logs and errors.
func (t MessageType) String() string {
	switch t {
	case MessageTypeNodeRegister:
		return "NodeRegister"
	case MessageTypeNodeStatus:
		return "NodeStatus"
	case MessageTypeAllocClientUpdate:
		return "AllocClientUpdate"
	case MessageTypeJobRegister:
		return "JobRegister"
	case MessageTypeJobDeregister:
		return "JobDeregister"
	case MessageTypeEvalUpdate:
		return "EvalUpdate"
	case MessageTypePlanResult:
		return "PlanResult"
	case MessageTypeServerUpsert:
		return "ServerUpsert"
	case MessageTypeServerRemove:
		return "ServerRemove"
	case MessageTypeNodeEligibility:
		return "NodeEligibility"
	case MessageTypeNodeDrain:
		return "NodeDrain"
	case MessageTypeGC:
		return "GC"
	case MessageTypeNodeStatusBatch:
		return "NodeStatusBatch"
	case MessageTypeAllocTransition:
		return "AllocTransition"
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}
