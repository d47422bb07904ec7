package fsm

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Errors of Decode.
var (
	// ErrIgnorableType: the entry's type is unknown to this server but marked
	// ignorable, so it may be skipped.
	ErrIgnorableType = errors.New("unknown ignorable message type")
	// ErrUnknownType: the entry's type is unknown and not ignorable.
	ErrUnknownType = errors.New("unknown message type")
)

// Marshaler is a generated message with vtprotobuf's fast marshalling.
type Marshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// vtMessage is a generated message with vtprotobuf's fast codec.
type vtMessage interface {
	proto.Message
	Marshaler
	UnmarshalVT([]byte) error
}

// Encode builds a raft log entry: the message type byte, then msg.
func Encode(msgType droverv1.MessageType, msg Marshaler) ([]byte, error) {
	buf := make([]byte, 1+msg.SizeVT())
	buf[0] = byte(msgType)
	if _, err := msg.MarshalToSizedBufferVT(buf[1:]); err != nil {
		return nil, fmt.Errorf("encode %s entry: %w", msgType, err)
	}
	return buf, nil
}

// Decode reads a raft log entry built by Encode. It never panics, whatever
// the input.
func Decode(data []byte) (droverv1.MessageType, any, error) {
	if len(data) == 0 {
		return 0, nil, errors.New("empty raft entry")
	}
	msgType := droverv1.MessageType(data[0])
	msg := newEntryMessage(msgType)
	if msg == nil {
		return msgType, nil, unknownType(msgType)
	}
	if err := msg.UnmarshalVT(data[1:]); err != nil {
		return msgType, nil, fmt.Errorf("decode %s entry: %w", msgType, err)
	}
	return msgType, msg, nil
}

// unknownType is the error for an entry of type t that this server does
// not know: ErrIgnorableType if t may be skipped, ErrUnknownType if not.
func unknownType(t droverv1.MessageType) error {
	if t.Ignorable() {
		return fmt.Errorf("%w %d", ErrIgnorableType, t)
	}
	return fmt.Errorf("%w %d", ErrUnknownType, t)
}

// newEntryMessage returns an empty message of the entry type, or nil for a
// type this server does not know.
func newEntryMessage(t droverv1.MessageType) vtMessage {
	switch t {
	case droverv1.MessageTypeNodeRegister:
		return &droverv1.NodeRegisterEntry{}
	case droverv1.MessageTypeNodeStatus:
		return &droverv1.NodeStatusEntry{}
	case droverv1.MessageTypeAllocClientUpdate, droverv1.MessageTypeAllocClientReport:
		return &droverv1.AllocClientUpdateEntry{}
	case droverv1.MessageTypeJobRegister, droverv1.MessageTypeJobRegisterChecked:
		return &droverv1.JobRegisterEntry{}
	case droverv1.MessageTypeJobDeregister:
		return &droverv1.JobDeregisterEntry{}
	case droverv1.MessageTypeEvalUpdate:
		return &droverv1.EvalUpdateEntry{}
	case droverv1.MessageTypePlanResult:
		return &droverv1.PlanResultEntry{}
	case droverv1.MessageTypeServerUpsert:
		return &droverv1.ServerUpsertEntry{}
	case droverv1.MessageTypeNodeEligibility:
		return &droverv1.NodeEligibilityEntry{}
	case droverv1.MessageTypeNodeDrain:
		return &droverv1.NodeDrainEntry{}
	case droverv1.MessageTypeGC:
		return &droverv1.GCEntry{}
	case droverv1.MessageTypeNodeStatusBatch:
		return &droverv1.NodeStatusBatchEntry{}
	case droverv1.MessageTypeAllocTransition:
		return &droverv1.AllocDesiredTransitionEntry{}
	case droverv1.MessageTypeServerRemove:
		return &droverv1.ServerRemoveEntry{}
	case droverv1.MessageTypeClusterMetadata:
		return &droverv1.ClusterMetadataEntry{}
	case droverv1.MessageTypeDeploymentStatus:
		return &droverv1.DeploymentStatusUpdateEntry{}
	case droverv1.MessageTypeDeploymentPromote:
		return &droverv1.DeploymentPromoteEntry{}
	case droverv1.MessageTypeACLBootstrap:
		return &droverv1.ACLBootstrapEntry{}
	case droverv1.MessageTypeACLPolicy:
		return &droverv1.ACLPolicyEntry{}
	case droverv1.MessageTypeACLToken:
		return &droverv1.ACLTokenEntry{}
	}
	return nil
}
