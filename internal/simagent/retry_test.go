package simagent

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestRemedyFor(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want remedy
	}{
		{status.Error(codes.Unavailable, "no leader"), elsewhere},
		{status.Error(codes.DeadlineExceeded, "hung"), elsewhere},
		{status.Error(codes.Internal, "boom"), elsewhere},
		{errors.New("not a status"), elsewhere},
		{status.Error(codes.NotFound, "node"), reregister},
		{status.Error(codes.FailedPrecondition, "down"), heartbeatFirst},
		{status.Error(codes.PermissionDenied, "secret"), sameServer},
		{status.Error(codes.InvalidArgument, "field"), sameServer},
	} {
		if got := remedyFor(tc.err); got != tc.want {
			t.Errorf("remedyFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestRetryHint(t *testing.T) {
	st, err := status.New(codes.Unavailable, "no leader").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if got := retryHint(st.Err()); got != time.Second {
		t.Errorf("hint %s, want 1s", got)
	}
	if got := retryHint(status.Error(codes.Unavailable, "bare")); got != 0 {
		t.Errorf("hint of a bare error %s, want 0", got)
	}
}
