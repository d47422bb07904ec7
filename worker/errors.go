package worker

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrShuttingDown is wrapped by every error a wait ends with because the
// pool is stopping, so callers can tell shutdown from a real timeout or a
// failure of the leader.
var ErrShuttingDown = errors.New("worker: shutting down")

// ErrRetryable marks an error from a Leader or Broker implementation as
// transient (no leader yet, plan queue disabled during an election). Wrap
// it when the failure did not come as a gRPC status.
var ErrRetryable = errors.New("worker: retryable")

// IsRetryable reports whether err is transient: it wraps ErrRetryable, or
// it carries (possibly wrapped) a gRPC status with code Unavailable, which
// is what a server returns while there is no leader. Submitting a plan is
// retried with backoff on such errors; any other error fails at once.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrRetryable) {
		return true
	}
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.Unavailable
}

// ErrStateBehind is wrapped by the error of a wait for the local state that
// timed out (Config.StateWait): this server is too far behind the leader to
// schedule the evaluation now.
var ErrStateBehind = errors.New("worker: local state behind")
