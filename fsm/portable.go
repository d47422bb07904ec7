package fsm

import (
	"google.golang.org/protobuf/proto"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Servers before the rpc layer and server.Apply refused them accepted
// strings that are not valid UTF-8 (and unknown fields that are not
// well-formed protobuf), so old logs and snapshots may hold some. Stored as
// they are, they would break the standard protobuf runtime on every read
// (grpcurl, -json output, the state digest). The FSM therefore repairs
// what it applies or restores, before the state store sees it, the same
// way on every server: invalid bytes become U+FFFD, malformed unknown
// fields are dropped (droverv1.MakePortable).

// makePortable repairs msg, decoded from encoded, if it is not portable,
// and reports how many strings and unknown-field sets it changed. A valid
// message costs one scan of its encoding.
func (f *FSM) makePortable(msg proto.Message, encoded []byte) int {
	if f.portable.Portable(msg.ProtoReflect().Descriptor(), encoded) {
		return 0
	}
	return droverv1.MakePortable(msg)
}
