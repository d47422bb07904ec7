package rpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func refusal(hint time.Duration) error {
	st, err := status.New(codes.ResourceExhausted, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(hint)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// TestRetryRefused: the client interceptor asks again only after an
// admission refusal (RESOURCE_EXHAUSTED with a hint), only while the
// deadline leaves time for the hint, at most maxRefusalRetries times, and
// never when the caller turned it off.
func TestRetryRefused(t *testing.T) {
	unavailableErr := status.Error(codes.Unavailable, "no leader")
	lagged := status.Error(codes.ResourceExhausted, "subscription lagged")
	tests := []struct {
		name      string
		answers   []error // the server's answers in turn; the last repeats
		timeout   time.Duration
		opts      []grpc.CallOption
		wantCalls int
		wantCode  codes.Code
	}{
		{"answered", []error{nil}, time.Minute, nil, 1, codes.OK},
		{"refused then answered", []error{refusal(time.Millisecond), refusal(time.Millisecond), nil}, time.Minute, nil, 3, codes.OK},
		{"refusal without hint", []error{lagged, nil}, time.Minute, nil, 1, codes.ResourceExhausted},
		{"other error", []error{unavailableErr, nil}, time.Minute, nil, 1, codes.Unavailable},
		{"turned off", []error{refusal(time.Millisecond), nil}, time.Minute, []grpc.CallOption{NoRefusalRetry{}}, 1, codes.ResourceExhausted},
		{"hint beyond the deadline", []error{refusal(time.Hour), nil}, time.Minute, nil, 1, codes.ResourceExhausted},
		{"refused for good", []error{refusal(time.Millisecond)}, time.Minute, nil, maxRefusalRetries + 1, codes.ResourceExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			calls := 0
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
				err := tc.answers[min(calls, len(tc.answers)-1)]
				calls++
				return err
			}
			err := retryRefused(ctx, "/m", nil, nil, nil, invoker, tc.opts...)
			if calls != tc.wantCalls || status.Code(err) != tc.wantCode {
				t.Errorf("%d calls ending in %v; want %d ending in %s", calls, err, tc.wantCalls, tc.wantCode)
			}
		})
	}
}
