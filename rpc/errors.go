package rpc

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Errors services return, besides the state store's. Wrap them with the ids
// involved; toStatus picks the gRPC code by errors.Is.
var (
	// ErrUnavailable marks failures after which the caller should retry,
	// perhaps on another server: no leader, leadership lost, shutting down.
	ErrUnavailable = errors.New("unavailable")
	// errPermissionDenied: the caller may not do this (wrong secret, an
	// allocation of another node).
	errPermissionDenied = errors.New("permission denied")
	// ErrFailedPrecondition means the system is not in a state that allows the
	// call; the caller must do something else first.
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrInvalidArgument means the request cannot be served as asked, for
	// reasons beyond a malformed field (an ambiguous id prefix).
	ErrInvalidArgument = errors.New("invalid argument")
)

// retryAfter is the back-off suggested with UNAVAILABLE.
const retryAfter = time.Second

// toStatus maps an error to its gRPC status. It is the only place codes are
// chosen; handlers return plain wrapped errors.
func toStatus(err error, logger *slog.Logger) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var verr *droverv1.ValidationError
	switch {
	case errors.As(err, &verr):
		return invalidArgument(verr)
	case errors.Is(err, state.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, errUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, state.ErrSecretMismatch), errors.Is(err, errPermissionDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrFailedPrecondition), errors.Is(err, state.ErrIndexMismatch), errors.Is(err, state.ErrPrecondition):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, state.ErrConflict), errors.Is(err, ErrUnavailable):
		return unavailable(err.Error())
	case errors.Is(err, events.ErrSubscriptionLagged):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, events.ErrSubscriptionClosed):
		return unavailable(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	logger.Error("internal error", "err", err)
	return status.Error(codes.Internal, err.Error())
}

func invalidArgument(verr *droverv1.ValidationError) error {
	br := &errdetails.BadRequest{}
	for _, v := range verr.Violations {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
			Field: v.Field, Description: v.Description,
		})
	}
	st, err := status.New(codes.InvalidArgument, verr.Error()).WithDetails(br)
	if err != nil {
		return status.Error(codes.InvalidArgument, verr.Error())
	}
	return st.Err()
}

// unavailable is UNAVAILABLE with a RetryInfo detail, so clients back off
// instead of retrying at once.
func unavailable(msg string) error {
	st, err := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
	if err != nil {
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}
