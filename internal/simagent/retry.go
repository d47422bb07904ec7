package simagent

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/rpc"
)

// remedy is what an agent does about a failed call.
type remedy int

const (
	// elsewhere: the server is down, has no leader, or did not answer in
	// time; try the next server after a backoff.
	elsewhere remedy = iota
	// reregister: the servers do not know the node (it was collected).
	reregister
	// heartbeatFirst: the node is down or disconnected; a heartbeat must
	// come before allocation reports.
	heartbeatFirst
	// sameServer: the call was refused for what it carried (a bug of the
	// simulator, a wrong secret); retrying elsewhere would not help.
	sameServer
)

// remedyFor classifies a call's error by its gRPC code.
func remedyFor(err error) remedy {
	switch status.Code(err) {
	case codes.NotFound:
		return reregister
	case codes.FailedPrecondition:
		return heartbeatFirst
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented, codes.AlreadyExists, codes.OutOfRange:
		return sameServer
	}
	// Unavailable (no leader, connection refused), DeadlineExceeded (the
	// server hung), ResourceExhausted, Internal, Unknown, Aborted.
	return elsewhere
}

// retryHint returns the delay a server suggested with its error (gRPC
// RetryInfo), or zero.
func retryHint(err error) time.Duration {
	d, _ := rpc.RetryHint(err)
	return d
}
